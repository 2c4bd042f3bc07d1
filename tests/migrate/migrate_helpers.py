"""Helpers for the migrate tests (imported by name: this folder is on sys.path under pytest)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from kubetrain.runtime import Environment, render
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed
from upstream_data import require, unknown_fields

HERE = Path(__file__).resolve().parent
UPSTREAM_V1 = HERE / "upstream" / "v1"
UPSTREAM_V2X = HERE / "upstream" / "v2x"
ENV = Environment(ssh_keypair=lambda: ssh_keypair_from_seed(b"migrate-tests"))
Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def upstream_schema(crd_file: str) -> Obj:
    """The openAPIV3Schema of one of upstream's v2.3 CRDs; skips, naming it, where absent."""
    return _schema(require(f"upstream-crds/{crd_file}"))


@functools.cache
def _schema(path: Path) -> Obj:
    crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    schema: Obj = version["schema"]["openAPIV3Schema"]
    return schema


def upstream_errors(obj: Obj) -> list[str]:
    """Schema errors of a TrainJob or TrainingRuntime under upstream's v2.3 CRD, and every field
    its structural schema would prune silently (jsonschema does not flag those)."""
    crd = {"TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes",
           "ClusterTrainingRuntime": "clustertrainingruntimes"}[obj["kind"]]  # fmt: skip
    schema = upstream_schema(f"trainer.kubeflow.org_{crd}.yaml")
    errors = [f"{list(e.path)}: {e.message}" for e in _validator(crd).iter_errors(obj)]
    return errors + [f"{p}: unknown field" for p in unknown_fields(obj, schema)]


@functools.cache
def _validator(crd: str) -> Any:
    import jsonschema

    # Draft7Validator without check_schema: validating upstream's big schema itself costs seconds.
    return jsonschema.Draft7Validator(
        _schema(require(f"upstream-crds/trainer.kubeflow.org_{crd}.yaml"))
    )


def pods(trainjob: Obj, runtime: Obj) -> dict[str, Obj]:
    """Rendered pod templates by replicated job name."""
    plan = render(trainjob, runtime, environment=ENV)
    jobset = next(o for o in plan.objects if o["kind"] == "JobSet")
    return {r["name"]: r["template"]["spec"]["template"] for r in jobset["spec"]["replicatedJobs"]}


def container(pod: Obj, name: str = "node") -> Obj:
    found: Obj = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return found


def env_of(c: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}
