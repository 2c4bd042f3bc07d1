"""JobSets shaped by the leaf plugins still satisfy upstream's JobSet CRD schema (read from
../shared/upstream-crds at test time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_leaves_plugin_flux import flux_runtime
from test_leaves_plugin_podgroups import torchtune

from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.render import render
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed

ENV = Environment(ssh_keypair=lambda: ssh_keypair_from_seed(b"schema"))


@pytest.fixture(scope="module")
def validator(shared: Path) -> Any:
    import jsonschema

    crd = yaml.safe_load((shared / "upstream-crds" / "jobset.x-k8s.io_jobsets.yaml").read_text())
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
        torchtune({"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 1}}}),
        {},
    ),
    (
        "torchtune with a coscheduling gang",
        torchtune({"coscheduling": {"scheduleTimeoutSeconds": 30}}),
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
