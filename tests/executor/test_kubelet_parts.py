"""The kubelet's pure parts: pod status from container events, addresses, pod references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.executor.addresses import AddressBook, pod_hostnames
from kubetrain.local.executor.objects import make_event, pod_references, random_suffix
from kubetrain.local.executor.podstatus import PodStatusModel
from kubetrain.local.executor.spec import read_spec

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"


def pod(restart_policy: str, init: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [{"name": "node", "image": "img"}],
    }
    if init:
        spec["initContainers"] = [{"name": "setup", "image": "img"}]
    return {"metadata": {"name": "p"}, "spec": spec}


def model(restart_policy: str = "Never", init: bool = False) -> PodStatusModel:
    return PodStatusModel(
        pod(restart_policy, init), pod_ip="127.0.0.2", host_ip="127.0.0.1", now=T0
    )


def cond(status: dict[str, Any], ctype: str) -> str:
    return next(c["status"] for c in status["conditions"] if c["type"] == ctype)


@pytest.mark.parametrize(
    ("policy", "exit_code", "phase"),
    [
        pytest.param("Never", 0, "Succeeded", id="exit 0 succeeds"),
        pytest.param("Never", 2, "Failed", id="a non-zero exit fails the pod under Never"),
        pytest.param("OnFailure", 2, "Running", id="OnFailure keeps the pod running to restart it"),
        pytest.param("OnFailure", 0, "Succeeded", id="OnFailure exit 0 succeeds"),
    ],
)
def test_phase_after_the_container_exits(policy: str, exit_code: int, phase: str) -> None:
    m = model(policy)
    m.started("node", 0, T1, "kubetrain://1")
    m.exited("node", exit_code, T2)
    status = m.status(T2)
    assert status["phase"] == phase
    term = status["containerStatuses"][0]["state"]["terminated"]
    assert term == {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": T1,
        "finishedAt": T2,
        "containerID": "kubetrain://1",
    }


def test_a_pod_is_pending_then_running_and_ready() -> None:
    m = model()
    status = m.status(T0)
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert (status["podIP"], status["hostIP"], status["startTime"]) == (
        "127.0.0.2",
        "127.0.0.1",
        T0,
    )
    m.started("node", 0, T1)
    status = m.status(T1)
    assert status["phase"] == "Running" and cond(status, "Ready") == "True"
    assert status["containerStatuses"][0]["ready"] is True


def test_a_crash_loop_keeps_the_last_termination_and_counts_restarts() -> None:
    m = model("OnFailure")
    m.started("node", 0, T0)
    m.exited("node", 1, T1)
    m.back_off("node", "p")
    status = m.status(T1)
    cs = status["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cond(status, "Ready") == "False"
    m.started("node", 1, T2)
    cs = m.status(T2)["containerStatuses"][0]
    assert cs["restartCount"] == 1 and "running" in cs["state"]


EXEC = {"exec": {"command": ["true"]}}
GRPC = {"grpc": {"port": 9000}}


@pytest.mark.parametrize(
    ("probes", "seen"),
    [
        pytest.param(
            {},
            [(True, True), (True, True), (True, True)],
            id="without probes a running container is started and ready at once",
        ),
        pytest.param(
            {"startupProbe": EXEC},
            [(False, False), (True, True), (False, False)],
            id="a startup probe holds started and ready back until it passes, again after a restart",
        ),
        pytest.param(
            {"startupProbe": EXEC, "readinessProbe": EXEC},
            [(False, False), (True, False), (False, False)],
            id="after the startup probe passes the readiness probe still decides ready",
        ),
        pytest.param(
            {"livenessProbe": EXEC},
            [(True, True), (True, True), (True, True)],
            id="a liveness probe alone holds nothing back",
        ),
        pytest.param(
            {"startupProbe": GRPC, "readinessProbe": GRPC},
            [(True, True), (True, True), (True, True)],
            id="grpc probes are not run here and hold nothing back",
        ),
    ],
)
def test_started_and_ready_follow_the_startup_probe(
    probes: dict[str, Any], seen: list[tuple[bool, bool]]
) -> None:
    spec = pod("OnFailure")
    spec["spec"]["containers"][0].update(probes)
    m = PodStatusModel(spec, pod_ip="127.0.0.2", host_ip="127.0.0.1", now=T0)

    def started_ready() -> tuple[bool, bool]:
        cs = m.status(T1)["containerStatuses"][0]
        return cs["started"], cs["ready"]

    m.started("node", 0, T1)
    after = [started_ready()]
    m.startup_passed("node")
    after.append(started_ready())
    m.exited("node", 143, T2)
    m.started("node", 1, T2)
    after.append(started_ready())
    assert after == seen


def test_a_container_whose_end_was_not_seen_reports_status_unknown() -> None:
    m = model()
    m.started("node", 0, T0)
    m.exited("node", 137, T1, known=False)
    term = m.status(T1)["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "ContainerStatusUnknown")


def test_init_containers_gate_the_pod() -> None:
    m = model(init=True)
    assert cond(m.status(T0), "Initialized") == "False"
    m.started("setup", 0, T0)
    m.exited("setup", 0, T1)
    assert cond(m.status(T1), "Initialized") == "True"


def test_resume_takes_over_what_a_previous_daemon_published() -> None:
    m = model("OnFailure")
    m.started("node", 0, T0)
    m.exited("node", 1, T1)
    m.back_off("node", "p")
    m.started("node", 1, T2)
    published = m.status(T2)
    again = model("OnFailure")
    again.resume(published)
    assert again.status(T2) == published


def jobset(name: str, uid: str, replicas: int = 1, pods: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": replicas,
                    "template": {"spec": {"parallelism": pods, "completions": pods}},
                }
            ]
        },
    }


def test_every_pod_dns_name_maps_to_its_own_address(tmp_path: Path) -> None:
    book = AddressBook(tmp_path / "a.json", base=0)
    spec = read_spec(jobset("tj", "u1", replicas=2))
    assert pod_hostnames(spec) == ["tj-node-0-0", "tj-node-0-1", "tj-node-1-0", "tj-node-1-1"]
    dns, by_host = book.hosts(spec)
    assert by_host["tj-node-0-0"] == "127.0.0.2" and by_host["tj-node-1-1"] == "127.0.0.5"
    assert dns["tj-node-0-1.tj"] == dns["tj-node-0-1.tj.ns.svc.cluster.local"] == "127.0.0.3"


def test_address_blocks_never_overlap_and_survive_a_restart(tmp_path: Path) -> None:
    book = AddressBook(tmp_path / "a.json", base=0)
    _, a = book.hosts(read_spec(jobset("a", "ua")))
    _, b = book.hosts(read_spec(jobset("b", "ub")))
    assert not set(a.values()) & set(b.values())
    book.release("ua")
    again = AddressBook(tmp_path / "a.json", base=0)
    _, b2 = again.hosts(read_spec(jobset("b", "ub")))
    assert b2 == b
    _, c = again.hosts(read_spec(jobset("c", "uc")))
    assert set(c.values()) == set(a.values())  # the freed block is reused


def test_pod_references_finds_every_configmap_secret_and_audience() -> None:
    p = {
        "spec": {
            "volumes": [
                {"name": "a", "configMap": {"name": "cm1"}},
                {"name": "b", "secret": {"secretName": "s1"}},
                {
                    "name": "c",
                    "projected": {
                        "sources": [
                            {"configMap": {"name": "cm2"}},
                            {
                                "serviceAccountToken": {
                                    "audience": "trainer.kubeflow.org",
                                    "path": "token",
                                }
                            },
                        ]
                    },
                },
            ],
            "containers": [
                {
                    "name": "node",
                    "env": [
                        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}
                    ],
                    "envFrom": [{"configMapRef": {"name": "cm3"}}],
                }
            ],
        }
    }
    assert pod_references(p) == ({"cm1", "cm2", "cm3"}, {"s1", "s2"}, {"trainer.kubeflow.org"})


def test_events_carry_first_timestamp_and_the_involved_object() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
    }
    ev = make_event(
        obj,
        "Normal",
        "Started",
        "Started container node",
        now=T0,
        component="kubelet",
        host="kubetrain",
    )
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == T0
    assert ev["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "uid": "u",
    }
    assert ev["metadata"]["name"].startswith("p.") and ev["metadata"]["namespace"] == "ns"


def test_random_suffixes_use_the_kubernetes_alphabet() -> None:
    suffix = random_suffix()
    assert len(suffix) == 5 and set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789")
