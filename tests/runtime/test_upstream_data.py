"""Upstream's own data: the SDK's TrainJob bodies and upstream's published runtimes render."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import container, jobset

from kubetrain.api.load import load_files
from kubetrain.api.schema import apply_defaults
from kubetrain.runtime import validate_trainjob
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.podspec import tree_copy
from kubetrain.runtime.render import Plan
from kubetrain.testing import make_trainjob
from upstream_data import params

Render = Callable[..., Plan]
SDK_BODIES = params("reference/sdk-trainjobs")
UPSTREAM_RUNTIMES = params("upstream-runtimes")

# Upstream's webhook rejects two of the SDK's own bodies (trainer v2.3.0 pkg/webhooks/): the stock runtimes
# have no initializer jobs, and the SDK's RuntimePatch sets env on the node container.
SDK_REJECTED = {
    "02-custom-trainer-initializer-options.yaml": [
        "spec.runtimeRef: must have dataset-initializer job when trainJob is configured with input datasetConfig",
        "spec.runtimeRef: must have model-initializer job when trainJob is configured with input modelConfig",
        "spec.runtimePatches: must not have envs for the dataset-initializer, model-initializer, node containers",
    ],
    "03-custom-trainer-mpi-deepspeed.yaml": [
        "spec.runtimeRef: must have dataset-initializer job when trainJob is configured with input datasetConfig",
    ],
}


def _name(path: Path) -> str:
    return path.name


def stored_default(name: str) -> dict[str, Any]:
    rt = next(r for r in default_runtimes() if r["metadata"]["name"] == name)
    out: dict[str, Any] = apply_defaults(tree_copy(rt))
    return out


@pytest.mark.parametrize("path", SDK_BODIES, ids=_name)
def test_sdk_bodies_render_against_the_default_runtimes(path: Path, checked_render: Render) -> None:
    (job,) = load_files([path])
    runtime = stored_default(job["spec"]["runtimeRef"]["name"])
    plan = checked_render(job, runtime)
    js = jobset(plan)
    trainer_job = next(
        j["name"]
        for j in js["spec"]["replicatedJobs"]
        if j["template"]
        .get("metadata", {})
        .get("labels", {})
        .get("trainer.kubeflow.org/trainjob-ancestor-step")
        == "trainer"
    )
    assert container(js, trainer_job)["image"] == job["spec"]["trainer"].get(
        "image", container(js, trainer_job)["image"]
    )
    verdict = validate_trainjob(job, runtime)
    assert [str(e) for e in verdict.errors] == SDK_REJECTED.get(path.name, [])


@pytest.mark.parametrize("path", UPSTREAM_RUNTIMES, ids=_name)
def test_each_upstream_runtime_renders_a_trainjob(path: Path, checked_render: Render) -> None:
    (runtime,) = load_files([path])
    name = runtime["metadata"]["name"]
    job = (
        make_trainjob("up")
        .runtime(name)
        .trainer(num_nodes=2 if "torchtune" not in name else 1)
        .obj()
    )
    assert validate_trainjob(job, runtime).ok
    plan = checked_render(job, runtime)
    js = jobset(plan)
    assert js["metadata"]["name"] == "up"
    counts = {j["name"]: j["template"]["spec"]["parallelism"] for j in js["spec"]["replicatedJobs"]}
    if "torchtune" not in name and name not in ("deepspeed-distributed", "mlx-distributed"):
        assert counts["node"] == 2
