"""Steps are named the way the official SDK names them, from pods a JobSet would create."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.client.steps import steps_from_pods


def pod(
    name: str,
    rjob: str,
    index: int | None = 0,
    *,
    phase: str = "Running",
    created: str = "2026-01-01T00:00:00Z",
    container: str = "node",
    restarts: int = 0,
    exit_code: int | None = None,
) -> dict[str, Any]:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "job",
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
    }
    if index is not None:
        labels["batch.kubernetes.io/job-completion-index"] = str(index)
    state: dict[str, Any] = {"running": {}}
    if exit_code is not None:
        state = {
            "terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}
        }
    return {
        "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": container, "restartCount": restarts, "state": state}],
        },
    }


CASES = [
    pytest.param(
        [pod("j-node-0-1", "node", 1), pod("j-node-0-0", "node", 0)],
        ["node-0", "node-1"],
        id="torch nodes are node-<index>, sorted by index",
    ),
    pytest.param(
        [
            pod("j-node-0-0", "node", 0),
            pod("j-mi-0-0", "model-initializer", 0, container="model-initializer"),
            pod("j-di-0-0", "dataset-initializer", 0, container="dataset-initializer"),
        ],
        ["dataset-initializer", "model-initializer", "node-0"],
        id="initializers come first under their own names",
    ),
    pytest.param(
        [
            pod("j-launcher-0-0", "launcher", 0),
            pod("j-node-0-0", "node", 0),
            pod("j-node-0-1", "node", 1),
        ],
        ["node-0", "node-1", "node-2"],
        id="an MPI launcher is node-0 and the workers shift by one",
    ),
    pytest.param(
        [pod("j-other-0-0", "sidecar-job", 0), pod("j-node-0-0", "node", 0)],
        ["node-0"],
        id="pods of other replicated jobs are not steps",
    ),
]


@pytest.mark.parametrize(("pods", "names"), CASES)
def test_step_names(pods: list[dict[str, Any]], names: list[str]) -> None:
    assert [s.name for s in steps_from_pods(pods)] == names


def test_the_newest_pod_is_the_step_after_a_restart() -> None:
    old = pod(
        "j-node-0-0-old", "node", 0, phase="Failed", exit_code=3, created="2026-01-01T00:00:00Z"
    )
    new = pod("j-node-0-0-new", "node", 0, created="2026-01-01T00:01:00Z")
    (step,) = steps_from_pods([new, old])
    assert (step.pod, step.phase) == ("j-node-0-0-new", "Running")


def test_a_step_reports_restarts_and_exit_code_of_its_container() -> None:
    (step,) = steps_from_pods([pod("p", "node", 0, phase="Failed", restarts=2, exit_code=137)])
    assert (step.restarts, step.exit_code, step.reason, step.container) == (2, 137, "Error", "node")
