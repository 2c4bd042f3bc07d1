"""Helpers for runtime tests (imported by name: this folder is on sys.path under pytest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubetrain.runtime import Environment, FeatureGates
from kubetrain.runtime.render import Plan
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
Obj = dict[str, Any]


def _fixed_keys() -> tuple[str, str]:
    return ssh_keypair_from_seed(b"kubetrain-tests")


# One Environment object for the whole run, so the framework cache is shared.
TEST_ENV = Environment(
    ssh_keypair=_fixed_keys, ca_pem="-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"
)
UPSTREAM = FeatureGates.upstream_defaults()


def load_upstream_runtime(name: str) -> Obj:
    """One of upstream's published runtime files, by file name without ``.yaml``."""
    with (SHARED / "upstream-runtimes" / f"{name}.yaml").open() as f:
        doc: Obj = yaml.load(f, Loader=yaml.CSafeLoader)
    return doc


def by_kind(plan: Plan, kind: str) -> list[Obj]:
    """The plan's objects of one kind."""
    return [o for o in plan.objects if o["kind"] == kind]


def jobset(plan: Plan) -> Obj:
    """The plan's single JobSet."""
    (js,) = by_kind(plan, "JobSet")
    return js


def pod(js: Obj, job: str) -> Obj:
    """The pod spec of replicatedJob ``job``."""
    for rjob in js["spec"]["replicatedJobs"]:
        if rjob["name"] == job:
            spec: Obj = rjob["template"]["spec"]["template"]["spec"]
            return spec
    raise KeyError(job)


def container(js: Obj, job: str, name: str = "node") -> Obj:
    """Container ``name`` of replicatedJob ``job``."""
    for c in pod(js, job).get("containers", []):
        if c["name"] == name:
            found: Obj = c
            return found
    raise KeyError(name)


def env_of(c: Obj) -> list[tuple[str, Any]]:
    """``[(name, value or valueFrom)]`` in order."""
    return [(e["name"], e.get("value", e.get("valueFrom"))) for e in c.get("env", [])]
