"""Torch plugin (trainer v2.3.0 pkg/runtime/framework/plugins/torch/): the PET_* env and the
rendezvous port on the trainer's node container and on envInjection targets, numProcPerNode
arithmetic, torchtune's command rewrite, and its admission checks."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import (
    RANK,
    TEST_ENV,
    UPSTREAM,
    Render,
    container,
    env_of,
    error_pairs,
    jobset,
    load_upstream_runtime,
    pod,
    torch_runtime,
)

from kubetrain.runtime import RenderError, render, validate_trainjob
from kubetrain.runtime.framework import ObjectRef
from kubetrain.runtime.render import existing_refs
from kubetrain.testing import make_runtime, make_trainjob

TORCH = load_upstream_runtime("torch_distributed")


def test_torch_two_gpu_nodes_match_the_reference_example(checked_render: Render) -> None:
    job = make_trainjob("tj1", "u").trainer(
        num_nodes=2, resources_per_node={"limits": {"nvidia.com/gpu": 2}}
    )
    js = jobset(checked_render(job.obj(), torch_runtime()))
    rjob = js["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 1
    assert rjob["template"]["spec"]["parallelism"] == 2
    assert rjob["template"]["spec"]["completions"] == 2
    node = container(js, "node")
    assert node["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert env_of(node) == [
        ("PET_NNODES", "2"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NODE_RANK", RANK),
        ("PET_MASTER_ADDR", "tj1-node-0-0.tj1"),
        ("PET_MASTER_PORT", "29500"),
    ]
    assert node["ports"] == [{"containerPort": 29500}]
    assert js["spec"]["suspend"] is False
    assert js["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj1",
            "uid": TEST_ENV.uid_placeholder,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize(
    ("trainer", "runtime_resources", "expected"),
    [
        pytest.param({"num_proc_per_node": 3}, None, "3", id="trainJob numProcPerNode wins"),
        pytest.param({}, None, "1", id="no resources at all gives one process"),
        pytest.param(
            {"resources_per_node": {"requests": {"cpu": "500m"}}},
            None,
            "1",
            id="500m rounds up to 1",
        ),
        pytest.param(
            {"resources_per_node": {"limits": {"cpu": 6}}},
            None,
            "6",
            id="CPU-only limits give an integer",
        ),
        pytest.param(
            {"resources_per_node": {"requests": {"cpu": "0"}, "limits": {"cpu": "4"}}},
            None,
            "4",
            id="zero CPU request falls back to the limit",
        ),
        pytest.param(
            {}, {"limits": {"cpu": "3"}}, "3", id="runtime CPU counts when the TrainJob sets none"
        ),
        pytest.param(
            {"resources_per_node": {"limits": {"cpu": "2"}}},
            {"limits": {"nvidia.com/gpu": "8"}},
            "2",
            id="trainJob resources replace the runtime's for the arithmetic",
        ),
        pytest.param({}, {"limits": {"nvidia.com/gpu": "1"}}, "auto", id="GPUs keep auto"),
    ],
)
def test_torch_num_proc_per_node(
    checked_render: Render, trainer: dict[str, Any], runtime_resources: Any, expected: str
) -> None:
    rt = torch_runtime(resources=runtime_resources) if runtime_resources else torch_runtime()
    js = jobset(checked_render(make_trainjob().trainer(**trainer).obj(), rt))
    assert dict(env_of(container(js, "node")))["PET_NPROC_PER_NODE"] == expected


def test_torch_env_order_runtime_then_trainjob_then_pet(checked_render: Render) -> None:
    rt = torch_runtime(env={"RUNTIME": "r", "A": "runtime"})
    job = make_trainjob("j").trainer(env={"A": "job", "B": "b"}).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    names = [n for n, _ in env_of(node)]
    assert names == [
        "RUNTIME",
        "A",
        "B",
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert dict(env_of(node))["A"] == "job"


def test_torch_without_trainer_block_gets_no_pet_env(checked_render: Render) -> None:
    job = make_trainjob("j").obj()
    node = container(jobset(checked_render(job, torch_runtime())), "node")
    assert "env" not in node and "ports" not in node


def test_runtime_num_nodes_is_the_default_count(checked_render: Render) -> None:
    rt = make_runtime().torch().num_nodes(3).job("node", ancestor="trainer").obj()
    js = jobset(checked_render(make_trainjob().trainer().obj(), rt))
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 3
    assert dict(env_of(container(js, "node")))["PET_NNODES"] == "3"


def test_env_injection_targets_get_all_five_pet_vars(checked_render: Render) -> None:
    rt = (
        make_runtime()
        .torch(
            envInjection={"targets": [{"jobName": "node", "containerNames": ["sidecar", "init"]}]}
        )
        .job(
            "node",
            ancestor="trainer",
            containers=[{"name": "node", "image": "x"}, {"name": "sidecar", "image": "y"}],
            init_containers=[{"name": "init", "image": "z"}],
        )
        .obj()
    )
    js = jobset(checked_render(make_trainjob("t").trainer().obj(), rt))
    for c in (container(js, "node", "sidecar"), pod(js, "node")["initContainers"][0]):
        assert [n for n, _ in env_of(c)] == [
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
            "PET_NODE_RANK",
            "PET_MASTER_ADDR",
            "PET_MASTER_PORT",
        ]


def test_torchtune_rewrites_the_command_without_master_env(checked_render: Render) -> None:
    rt = load_upstream_runtime("llama3_2_1B")
    job = (
        make_trainjob("tune")
        .runtime("torchtune-llama3.2-1b")
        .trainer(command=["tune", "run"])
        .obj()
    )
    node = container(jobset(checked_render(job, rt)), "node")
    # Runtime GPUs 2, one node, auto -> distributed full fine-tune with a rendezvous endpoint.
    assert node["command"] == [
        "tune",
        "run",
        "--rdzv_endpoint=tune-node-0-0.tune:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert [n for n, _ in env_of(node)] == ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"]


@pytest.mark.parametrize(
    ("job", "runtime", "expected"),
    [
        pytest.param(
            make_trainjob("ok").trainer(num_nodes=2).obj(),
            TORCH,
            [],
            id="a plain torch job is admitted",
        ),
        pytest.param(
            make_trainjob()
            .trainer(env={"PET_NODE_RANK": "0", "PET_MASTER_PORT": "1", "OK": "1"})
            .obj(),
            TORCH,
            [
                (
                    "spec.trainer.env",
                    "must not have reserved envs, invalid envs configured: [PET_MASTER_PORT PET_NODE_RANK]",
                )
            ],
            id="reserved PET_ envs are rejected, listed sorted",
        ),
        pytest.param(
            make_trainjob().trainer().obj(),
            make_runtime()
            .torch(envInjection={"targets": [{"jobName": "node", "containerNames": ["ghost"]}]})
            .job("node", ancestor="trainer")
            .obj(),
            [
                (
                    "spec.runtimeRef",
                    'envInjection target podSet "node" container "ghost" not found in runtime template',
                )
            ],
            id="envInjection targets must exist",
        ),
        pytest.param(
            make_trainjob()
            .runtime("torchtune-qwen2.5-1.5b")
            .trainer(command=["tune", "run"], args=["output_dir=/x"])
            .obj(),
            load_upstream_runtime("qwen2_5_1.5B"),
            [
                (
                    "spec.trainer.args[0]",
                    'must not set immutable config "output_dir" in trainer args; it is managed by the runtime',
                )
            ],
            id="torchtune's managed config keys are immutable",
        ),
    ],
)
def test_admission(job: Any, runtime: Any, expected: list[tuple[str, str]]) -> None:
    assert error_pairs(validate_trainjob(job, runtime).errors) == expected


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        pytest.param(
            make_runtime()
            .torch(envInjection={"targets": [{"jobName": "node", "containerNames": ["nope"]}]})
            .job("node", ancestor="trainer")
            .obj(),
            'envInjection target podSet "node" container "nope" not found',
            id="a missing envInjection container fails the reconcile",
        ),
    ],
)
def test_render_errors(runtime: Any, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render(make_trainjob().trainer().obj(), runtime, gates=UPSTREAM, environment=TEST_ENV)


@pytest.mark.parametrize(
    ("runtime_spec", "expected"),
    [pytest.param({"mlPolicy": {"torch": {}}}, [], id="a torch runtime reads back nothing")],
)
def test_objects_read_back(runtime_spec: dict[str, Any], expected: list[ObjectRef]) -> None:
    job = {"metadata": {"name": "job", "namespace": "ns"}}
    assert existing_refs(job, {"spec": runtime_spec}) == expected
