"""PlainML plugin (trainer v2.3.0 pkg/runtime/framework/plugins/plainml/): for runtimes without a
torch, MPI or JAX policy, the trainer count from ``numNodes`` and ``spec.trainer.env``."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import Render, container, env_of, jobset

from kubetrain.testing import make_runtime, make_trainjob


@pytest.mark.parametrize(
    ("parallelism", "trainer", "env", "count"),
    [
        pytest.param(
            1,
            {"num_nodes": 4, "env": {"K": "v"}},
            [("K", "v")],
            4,
            id="numNodes sets the count and the TrainJob's env reaches the node",
        ),
        pytest.param(
            5, None, [], 5, id="without a trainer block the count is the runtime's parallelism"
        ),
        pytest.param(
            2, {"env": {"K": "v"}}, [("K", "v")], 2, id="env without numNodes keeps the count"
        ),
    ],
)
def test_what_plainml_contributes(
    checked_render: Render,
    parallelism: int,
    trainer: dict[str, Any] | None,
    env: list[tuple[str, Any]],
    count: int,
) -> None:
    runtime = make_runtime("plain").job("node", ancestor="trainer", parallelism=parallelism).obj()
    builder = make_trainjob().runtime("plain")
    if trainer is not None:
        builder = builder.trainer(**trainer)
    js = jobset(checked_render(builder.obj(), runtime))
    node = container(js, "node")
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == count
    assert env_of(node) == env
    assert "ports" not in node
