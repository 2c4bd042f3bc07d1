"""JobSet plugin (trainer v2.3.0 pkg/runtime/framework/plugins/jobset/): the JobSet itself:
initializer wiring (STORAGE_URI, env, secret), the trainer's image/command/args, runtime patches
and template metadata, suspend, a running JobSet left alone; and its admission checks of the
initializer jobs and of runtimePatches."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import (
    Render,
    admission_initializer_runtime,
    container,
    env_of,
    error_pairs,
    jobset,
    load_upstream_runtime,
    pod,
    torch_runtime,
)

from kubetrain.runtime import Existing, validate_trainjob
from kubetrain.testing import make_runtime, make_trainjob

TORCH = load_upstream_runtime("torch_distributed")


@pytest.mark.parametrize(
    ("job", "runtime", "expected"),
    [
        pytest.param(
            make_trainjob().dataset("hf://x").model("hf://y").obj(),
            TORCH,
            [
                (
                    "spec.runtimeRef",
                    "must have dataset-initializer job when trainJob is configured with input datasetConfig",
                ),
                (
                    "spec.runtimeRef",
                    "must have model-initializer job when trainJob is configured with input modelConfig",
                ),
            ],
            id="initializers need their jobs",
        ),
        pytest.param(
            make_trainjob().dataset("hf://x").obj(),
            admission_initializer_runtime(ds_container="other"),
            [
                (
                    "spec.runtimeRef",
                    "must have container with name - dataset-initializer in the dataset-initializer job",
                )
            ],
            id="dataset initializer needs its container",
        ),
        pytest.param(
            make_trainjob().dataset("hf://x").obj(),
            admission_initializer_runtime(ds_mount=False),
            [
                (
                    "spec.runtimeRef",
                    "must have volumeMount with name - initializer in container dataset-initializer of the"
                    " dataset-initializer job",
                )
            ],
            id="dataset initializer needs the initializer mount (v2.3)",
        ),
        pytest.param(
            make_trainjob().pod_patch("kueue.k8s.io/", "node", {"nodeSelector": {"a": "b"}}).obj(),
            TORCH,
            [
                (
                    "spec.runtimePatches.manager",
                    'must be a domain-prefixed path (such as "acme.io/foo")',
                )
            ],
            id="patch manager needs a path after the domain",
        ),
        pytest.param(
            make_trainjob()
            .pod_patch("kueue.k8s.io/manager", "node", {"nodeSelector": {"a": "b"}})
            .obj(),
            TORCH,
            [],
            id="a domain-prefixed manager is fine",
        ),
        pytest.param(
            make_trainjob().pod_patch("a.io/m", "launcher", {"nodeSelector": {"a": "b"}}).obj(),
            TORCH,
            [
                (
                    "spec.runtimePatches",
                    "must not have replicated job that doesn't exist in the runtime job template",
                )
            ],
            id="patched job must exist in the runtime",
        ),
        pytest.param(
            make_trainjob().pod_patch("a.io/m", "node", {"containers": [{"name": "side"}]}).obj(),
            TORCH,
            [
                (
                    "spec.runtimePatches",
                    "must not have container that doesn't exist in the runtime job node",
                )
            ],
            id="patched container must exist",
        ),
        pytest.param(
            make_trainjob()
            .pod_patch("a.io/m", "node", {"initContainers": [{"name": "nope"}]})
            .obj(),
            admission_initializer_runtime(),
            [
                (
                    "spec.runtimePatches",
                    "must not have initContainer that doesn't exist in the runtime job node",
                )
            ],
            id="patched init container must exist",
        ),
        pytest.param(
            make_trainjob()
            .pod_patch("a.io/m", "node", {"initContainers": [{"name": "warmup"}]})
            .obj(),
            admission_initializer_runtime(),
            [],
            id="init and regular container names are pooled",
        ),
        pytest.param(
            make_trainjob()
            .pod_patch("a.io/m", "node", {"containers": [{"name": "node", "env": [{"name": "X"}]}]})
            .obj(),
            TORCH,
            [
                (
                    "spec.runtimePatches",
                    "must not have envs for the dataset-initializer, model-initializer, node containers",
                )
            ],
            id="patches must not set env on node",
        ),
    ],
)
def test_admission(job: Any, runtime: Any, expected: list[tuple[str, str]]) -> None:
    assert error_pairs(validate_trainjob(job, runtime).errors) == expected


@pytest.mark.parametrize(
    ("job_suspend", "jobset_suspend", "applied"),
    [
        pytest.param(False, False, None, id="a running JobSet is never updated"),
        pytest.param(True, False, True, id="suspending re-applies the JobSet suspended"),
        pytest.param(False, True, False, id="resuming re-applies the JobSet running"),
        pytest.param(True, None, True, id="a new JobSet is created suspended with its TrainJob"),
        pytest.param(False, None, False, id="a new JobSet is created running with its TrainJob"),
    ],
)
def test_suspend_and_a_running_jobset(
    checked_render: Render, job_suspend: bool, jobset_suspend: bool | None, applied: bool | None
) -> None:
    existing = Existing()
    if jobset_suspend is not None:
        existing = Existing.of(
            {"kind": "JobSet", "metadata": {"name": "job"}, "spec": {"suspend": jobset_suspend}}
        )
    plan = checked_render(
        make_trainjob().suspend(job_suspend).obj(), torch_runtime(), existing=existing
    )
    jobsets = [o for o in plan.objects if o["kind"] == "JobSet"]
    if applied is None:
        assert jobsets == []
    else:
        assert [js["spec"]["suspend"] for js in jobsets] == [applied]


def test_trainer_image_command_args_replace_the_runtime(checked_render: Render) -> None:
    rt = torch_runtime(command=["sleep", "1"])
    job = make_trainjob().trainer(image="img:2", command=["python"], args=["a.py"]).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    assert (node["image"], node["command"], node["args"]) == ("img:2", ["python"], ["a.py"])


def initializer_runtime() -> dict[str, Any]:
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    return (
        make_runtime()
        .torch()
        .job(
            "dataset-initializer",
            ancestor="dataset-initializer",
            env={"STORAGE_URI": "hf://default"},
            volume_mounts=mount,
        )
        .job("model-initializer", ancestor="model-initializer", volume_mounts=mount)
        .job("node", ancestor="trainer")
        .obj()
    )


def test_initializers_get_storage_uri_env_and_secret(checked_render: Render) -> None:
    job = (
        make_trainjob()
        .dataset("hf://tatsu-lab/alpaca", env={"A": "1"}, secret="ds")
        .model("s3://bucket/m", env=[{"name": "STORAGE_URI", "value": "s3://env-wins"}])
        .obj()
    )
    js = jobset(checked_render(job, initializer_runtime()))
    ds = container(js, "dataset-initializer", "dataset-initializer")
    assert env_of(ds) == [("STORAGE_URI", "hf://tatsu-lab/alpaca"), ("A", "1")]
    assert ds["envFrom"] == [{"secretRef": {"name": "ds"}}]
    model = container(js, "model-initializer", "model-initializer")
    assert env_of(model) == [("STORAGE_URI", "s3://env-wins")]
    assert "envFrom" not in model
    assert [j["replicas"] for j in js["spec"]["replicatedJobs"]] == [1, 1, 1]


def test_initializer_not_requested_leaves_the_runtime_default(checked_render: Render) -> None:
    js = jobset(checked_render(make_trainjob().obj(), initializer_runtime()))
    assert env_of(container(js, "dataset-initializer", "dataset-initializer")) == [
        ("STORAGE_URI", "hf://default")
    ]


def test_runtime_patches_merge_and_keep_runtime_order(checked_render: Render) -> None:
    rt = initializer_runtime()
    job = (
        make_trainjob()
        .patch(
            "kueue.x-k8s.io/manager",
            {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "spec": {"template": {"spec": {"nodeSelector": {"pool": "gpu"}}}}
                        },
                    },
                    {
                        "name": "dataset-initializer",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}
                                }
                            }
                        },
                    },
                ]
            },
            metadata={"labels": {"patched": "yes"}, "annotations": {"a": "1"}},
        )
        .patch("second.io/manager", metadata={"labels": {"patched": "again"}})
        .obj()
    )
    js = jobset(checked_render(job, rt))
    assert [j["name"] for j in js["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]
    assert pod(js, "node")["nodeSelector"] == {"pool": "gpu"}
    assert pod(js, "dataset-initializer")["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert js["metadata"]["labels"] == {"patched": "again"}
    assert js["metadata"]["annotations"] == {"a": "1"}


def test_runtime_template_labels_reach_the_jobset_but_trainjob_labels_do_not(
    checked_render: Render,
) -> None:
    rt = (
        make_runtime()
        .torch()
        .template_metadata(labels={"from": "runtime"})
        .job("node", ancestor="trainer")
        .obj()
    )
    job = make_trainjob().label("team", "ml").obj()
    js = jobset(checked_render(job, rt))
    assert js["metadata"]["labels"] == {"from": "runtime"}
    assert "annotations" not in js["metadata"]
