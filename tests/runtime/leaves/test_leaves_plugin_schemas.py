"""JobSets shaped by the leaf plugins still satisfy the JobSet CRD schema (upstream's where present,
see ``upstream_data.jobset_crd``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from plugin_runtimes import flux_runtime, gang_runtime

from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.render import render
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed
from upstream_data import jobset_crd

ENV = Environment(ssh_keypair=lambda: ssh_keypair_from_seed(b"schema"))


@pytest.fixture(scope="module")
def validator() -> Any:
    import jsonschema

    crd = yaml.safe_load(jobset_crd().read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def _runtime(name: str) -> dict[str, Any]:
    return next(r for r in default_runtimes() if r["metadata"]["name"] == name)


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "deepspeed over MPI on three nodes",
        _runtime("deepspeed-distributed"),
        {"numNodes": 3, "numProcPerNode": 2},
    ),
    (
        "mlx over MPI with GPUs",
        _runtime("mlx-distributed"),
        {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}},
    ),
    ("flux on two nodes", flux_runtime(), {"numNodes": 2, "args": ["-in", "x"]}),
    (
        "torchtune with a volcano gang",
        gang_runtime({"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 1}}}),
        {},
    ),
    (
        "torchtune with a coscheduling gang",
        gang_runtime({"coscheduling": {"scheduleTimeoutSeconds": 30}}),
        {},
    ),
]


@pytest.mark.parametrize(("runtime", "trainer"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rendered_jobset_satisfies_upstreams_schema(
    validator: Any, runtime: dict[str, Any], trainer: dict[str, Any]
) -> None:
    job = {
        "metadata": {"name": "schema-check", "namespace": "default", "uid": "u"},
        "spec": {"runtimeRef": {"name": runtime["metadata"]["name"]}, "trainer": trainer},
    }
    plan = render(job, runtime, gates=FeatureGates.upstream_defaults(), environment=ENV)
    jobsets = [o for o in plan.objects if o["kind"] == "JobSet"]
    assert len(jobsets) == 1
    errors = sorted(validator.iter_errors(jobsets[0]), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
