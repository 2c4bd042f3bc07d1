"""JAX plugin (trainer v2.3.0 pkg/runtime/framework/plugins/jax/): process count, process id and
coordinator address on the trainer's node container, the coordinator port, the trainer count."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import RANK, Render, container, env_of, jobset

from kubetrain.testing import make_runtime, make_trainjob

RUNTIME = make_runtime("jax-distributed").jax().num_nodes(2).job("node", ancestor="trainer").obj()
PORTS = [{"containerPort": 29500}]


@pytest.mark.parametrize(
    ("trainer", "env", "ports", "count"),
    [
        pytest.param(
            {"num_nodes": 3, "env": {"X": "1"}},
            [
                ("JAX_NUM_PROCESSES", "3"),
                ("JAX_PROCESS_ID", RANK),
                ("JAX_COORDINATOR_ADDRESS", "jx-node-0-0.jx:29500"),
                ("X", "1"),
            ],
            PORTS,
            3,
            id="JAX env comes first, then the TrainJob's, with the coordinator port",
        ),
        pytest.param(
            {},
            [
                ("JAX_NUM_PROCESSES", "2"),
                ("JAX_PROCESS_ID", RANK),
                ("JAX_COORDINATOR_ADDRESS", "jx-node-0-0.jx:29500"),
            ],
            PORTS,
            2,
            id="the runtime's numNodes is the process count when the TrainJob sets none",
        ),
        pytest.param(
            None, [], None, 2, id="without a trainer block the container gets no env and no port"
        ),
    ],
)
def test_what_jax_contributes(
    checked_render: Render,
    trainer: dict[str, Any] | None,
    env: list[tuple[str, Any]],
    ports: Any,
    count: int,
) -> None:
    builder = make_trainjob("jx").runtime("jax-distributed")
    if trainer is not None:
        builder = builder.trainer(**trainer)
    js = jobset(checked_render(builder.obj(), RUNTIME))
    node = container(js, "node")
    assert env_of(node) == env
    assert node.get("ports") == ports
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == count
