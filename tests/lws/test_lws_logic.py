"""LeaderWorkerSet's decisions as a table: which pods to create and delete, and the status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubetrain.api.schema import Structural
from kubetrain.local.lws import lws_crd
from kubetrain.local.lws.logic import (
    GROUP_INDEX,
    NAME,
    SUBDOMAIN_POLICY,
    WORKER_INDEX,
    desired_pods,
    headless_services,
    plan,
)

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


def leader_pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaders as the API server stores them: with a uid."""
    leaders = [p for p in desired_pods(obj) if p["metadata"]["labels"][WORKER_INDEX] == "0"]
    for p in leaders:
        p["metadata"]["uid"] = "uid-" + p["metadata"]["name"]
    return leaders


@pytest.mark.parametrize(
    ("network", "subdomains", "leader_address", "services"),
    [
        pytest.param(
            None, ["s", "s", "s", "s"], "s-1.s.ns",
            [("s", {NAME: "s"}, "LeaderWorkerSet/s")],
            id="no networkConfig: one Service for every group, owned by the LWS",
        ),
        pytest.param(
            {"subdomainPolicy": "Shared"}, ["s", "s", "s", "s"], "s-1.s.ns",
            [("s", {NAME: "s"}, "LeaderWorkerSet/s")],
            id="Shared: the same",
        ),
        pytest.param(
            {"subdomainPolicy": "UniquePerReplica"}, ["s-0", "s-0", "s-1", "s-1"], "s-1.s-1.ns",
            [("s-0", {NAME: "s", GROUP_INDEX: "0"}, "Pod/s-0"),
             ("s-1", {NAME: "s", GROUP_INDEX: "1"}, "Pod/s-1")],
            id="UniquePerReplica: a Service per group named and owned by its leader",
        ),
    ],
)  # fmt: skip
def test_the_subdomain_policy_names_the_headless_services(
    network: dict[str, str] | None,
    subdomains: list[str],
    leader_address: str,
    services: list[tuple[str, dict[str, str], str]],
) -> None:
    obj = lws(networkConfig=network) if network else lws()
    pods = desired_pods(obj)
    assert [p["spec"]["subdomain"] for p in pods] == subdomains
    env = pods[-1]["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "LWS_LEADER_ADDRESS", "value": leader_address}
    unique = network == {"subdomainPolicy": "UniquePerReplica"}
    assert [SUBDOMAIN_POLICY in p["metadata"]["annotations"] for p in pods] == (
        [unique, False, unique, False]
    )
    got = [
        (s["metadata"]["name"], s["spec"]["selector"],
         "{kind}/{name}".format(**s["metadata"]["ownerReferences"][0]))
        for s in headless_services(obj, leader_pods(obj))
    ]  # fmt: skip
    assert got == services


def test_a_leader_not_yet_created_or_going_has_no_service_yet() -> None:
    obj = lws(networkConfig={"subdomainPolicy": "UniquePerReplica"})
    first, second = leader_pods(obj)
    del first["metadata"]["uid"]
    second["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert headless_services(obj, [first, second]) == []
