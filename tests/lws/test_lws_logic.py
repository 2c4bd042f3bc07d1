"""LeaderWorkerSet's decisions as a table: which pods to create and delete, and the status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubetrain.api.schema import Structural
from kubetrain.local.lws import lws_crd
from kubetrain.local.lws.logic import desired_pods, plan

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# What the API server stores: the LWS CRD's defaults filled in.
STORED = Structural(lws_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def lws(replicas: int = 2, size: int = 2, **spec: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "size": size,
        "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "x"}]}},
    }
    template.update(spec.pop("template", {}))
    return STORED.default(
        {
            "metadata": {"name": "s", "namespace": "ns", "uid": "u", "generation": 1},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": template, **spec},
        }
    )


def pod(
    name: str, *, ready: bool = True, restarts: int = 0, phase: str = "Running"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "w", "restartCount": restarts}],
        },
    }


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


@pytest.mark.parametrize(
    ("obj", "pods", "create", "delete"),
    [
        pytest.param(lws(), [], ["s-0", "s-1"], [], id="leaders first: workers wait for theirs"),
        pytest.param(lws(), [pod("s-0"), pod("s-1")], ["s-0-1", "s-1-1"], [], id="then the workers"),
        pytest.param(
            lws(startupPolicy="LeaderReady"), [pod("s-0", ready=False), pod("s-1")], ["s-1-1"], [],
            id="LeaderReady: workers only of a ready leader",
        ),
        pytest.param(
            lws(), [pod("s-0"), pod("s-0-1", restarts=1), pod("s-1"), pod("s-1-1")], [],
            ["s-0", "s-0-1"], id="a restarted worker takes its whole group down",
        ),
        pytest.param(
            lws(template={"restartPolicy": "None"}),
            [pod("s-0"), pod("s-0-1", restarts=1), pod("s-1"), pod("s-1-1")], [], [],
            id="restartPolicy None leaves the group alone",
        ),
        pytest.param(
            lws(replicas=1), [pod("s-0"), pod("s-0-1"), pod("s-1"), pod("s-1-1")], [],
            ["s-1", "s-1-1"], id="scaled down: the extra group goes",
        ),
    ],
)  # fmt: skip
def test_what_to_create_and_delete(
    obj: dict[str, Any], pods: list[dict[str, Any]], create: list[str], delete: list[str]
) -> None:
    step = plan(obj, pods, NOW)
    assert (names(step.create), sorted(step.delete)) == (create, delete)


@pytest.mark.parametrize(
    ("pods", "ready", "available"),
    [
        pytest.param([pod(n) for n in ("s-0", "s-0-1", "s-1", "s-1-1")], 2, "True", id="all ready"),
        pytest.param(
            [pod("s-0"), pod("s-0-1", ready=False), pod("s-1"), pod("s-1-1")], 1, "False",
            id="one worker not ready: its group is not",
        ),
    ],
)  # fmt: skip
def test_available_when_every_group_is_ready(
    pods: list[dict[str, Any]], ready: int, available: str
) -> None:
    status = plan(lws(), pods, NOW).status
    assert status["readyReplicas"] == ready
    assert {c["type"]: c["status"] for c in status["conditions"]}.get("Available", "False") == (
        available
    )
    assert status["hpaPodSelector"] == (
        "leaderworkerset.sigs.k8s.io/name=s,leaderworkerset.sigs.k8s.io/worker-index=0"
    )


def test_a_container_that_sets_an_lws_variable_keeps_its_own_value() -> None:
    obj = lws(replicas=1)
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "LWS_GROUP_SIZE", "value": "7"}
    ]
    env = desired_pods(obj)[1]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX", "LWS_GROUP_SIZE"]
    assert env[-1]["value"] == "7"
