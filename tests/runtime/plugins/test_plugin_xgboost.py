"""XGBoost plugin (trainer v2.3.0 pkg/runtime/framework/plugins/xgboost/): the Rabit tracker
address and port, task id and worker count (nodes x GPUs) after the TrainJob's env, and the
reserved DMLC_* env check (trainer v2.3.0 pkg/webhooks/)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import RANK, Render, container, env_of, error_pairs, jobset

from kubetrain.runtime import validate_trainjob
from kubetrain.testing import make_runtime, make_trainjob

RUNTIME = (
    make_runtime("xgboost-distributed").xgboost().num_nodes(1).job("node", ancestor="trainer").obj()
)
GPUS = {"limits": {"nvidia.com/gpu": 4}}


def tracker(workers: str) -> list[tuple[str, Any]]:
    return [
        ("DMLC_TRACKER_URI", "xg-node-0-0.xg"),
        ("DMLC_TRACKER_PORT", "29500"),
        ("DMLC_TASK_ID", RANK),
        ("DMLC_NUM_WORKER", workers),
    ]


@pytest.mark.parametrize(
    ("trainer", "env", "ports"),
    [
        pytest.param(
            {"num_nodes": 2, "env": {"E": "e"}, "resources_per_node": GPUS},
            [("E", "e"), *tracker("8")],
            [{"containerPort": 29500}],
            id="workers multiply nodes by GPUs, after the TrainJob's env",
        ),
        pytest.param(
            {"num_nodes": 3},
            tracker("3"),
            [{"containerPort": 29500}],
            id="without GPUs there is one worker per node",
        ),
        pytest.param(None, [], None, id="without a trainer block nothing is added"),
    ],
)
def test_what_xgboost_contributes(
    checked_render: Render, trainer: dict[str, Any] | None, env: Any, ports: Any
) -> None:
    builder = make_trainjob("xg").runtime("xgboost-distributed")
    if trainer is not None:
        builder = builder.trainer(**trainer)
    node = container(jobset(checked_render(builder.obj(), RUNTIME)), "node")
    assert env_of(node) == env
    assert node.get("ports") == ports


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param(
            {"A": "1", "DMLC_TASK_ID": "3"},
            [("spec.trainer.env[1]", "DMLC_TASK_ID is reserved for the XGBoost runtime")],
            id="a reserved env is rejected by its index",
        ),
        pytest.param({"A": "1"}, [], id="other env is admitted"),
    ],
)
def test_admission(env: dict[str, str], expected: list[tuple[str, str]]) -> None:
    job = make_trainjob().runtime("xgboost-distributed").trainer(env=env).obj()
    assert error_pairs(validate_trainjob(job, RUNTIME).errors) == expected
