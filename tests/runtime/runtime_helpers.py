"""Helpers for runtime tests (imported by name: this folder is on sys.path under pytest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from kubetrain.api.errors import FieldError
from kubetrain.runtime import Environment, FeatureGates
from kubetrain.runtime.defaults import data_cache_runtimes, default_runtimes
from kubetrain.runtime.render import Plan
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed
from kubetrain.testing import make_runtime
from upstream_data import find

Obj = dict[str, Any]
Render = Callable[..., Plan]
"""The ``checked_render`` fixture: ``render`` with the test environment, JobSets schema-checked."""


def _fixed_keys() -> tuple[str, str]:
    return ssh_keypair_from_seed(b"kubetrain-tests")


# One Environment object for the whole run, so the framework cache is shared.
TEST_ENV = Environment(
    ssh_keypair=_fixed_keys, ca_pem="-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"
)
UPSTREAM = FeatureGates.upstream_defaults()


# Upstream's runtime file names → the runtimes' names.
UPSTREAM_RUNTIME_FILES = {
    "torch_distributed": "torch-distributed",
    "deepspeed_distributed": "deepspeed-distributed",
    "mlx_distributed": "mlx-distributed",
    "jax_distributed": "jax-distributed",
    "xgboost_distributed": "xgboost-distributed",
    "llama3_2_1B": "torchtune-llama3.2-1b",
    "llama3_2_3B": "torchtune-llama3.2-3b",
    "qwen2_5_1.5B": "torchtune-qwen2.5-1.5b",
    "torch_distributed_with_cache": "torch-distributed-with-cache",
}


def load_upstream_runtime(name: str) -> Obj:
    """One of upstream's published runtime files, by file name without ``.yaml``.

    Without upstream's files, kubetrain's own copy of that runtime (tests/runtime/leaves compares
    the two where upstream's are present), so the tests that only need *a* real runtime still run.
    """
    path = find(f"upstream-runtimes/{name}.yaml")
    if path is None:
        wanted = UPSTREAM_RUNTIME_FILES[name]
        return next(
            r
            for r in [*default_runtimes(), *data_cache_runtimes()]
            if r["metadata"]["name"] == wanted
        )
    with path.open() as f:
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


def error_pairs(errors: list[FieldError]) -> list[tuple[str, str]]:
    """``[(path, reason)]`` of validation errors, in order."""
    return [(e.path, e.reason) for e in errors]


RANK = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
"""The env source of a pod's rank: its Job completion index."""


def torch_runtime(**job: Any) -> Obj:
    """A one-node torch runtime with one ``node`` job; ``job`` goes to the job builder."""
    job.setdefault("image", "pytorch")
    builder = make_runtime("torch-distributed").framework("torch").num_nodes(1).torch()
    return builder.job("node", ancestor="trainer", **job).obj()


def admission_initializer_runtime(
    *, ds_mount: bool = True, ds_container: str = "dataset-initializer"
) -> Obj:
    """A torch runtime with a dataset-initializer job (its container and mount configurable)
    and a node job with an init container ``warmup``."""
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    return (
        make_runtime()
        .torch()
        .job(
            "dataset-initializer",
            ancestor="dataset-initializer",
            container=ds_container,
            volume_mounts=mount if ds_mount else None,
        )
        .job("node", ancestor="trainer", init_containers=[{"name": "warmup", "image": "x"}])
        .obj()
    )
