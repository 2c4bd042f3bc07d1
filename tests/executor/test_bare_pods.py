"""Issue 21: the executor is a kubelet for every Pod, not only a JobSet's.

A Pod created directly is bound to the engine's node, runs in the same sandbox and pod network,
reports its node, address, conditions and Events, restarts as its restartPolicy says and is
deleted gracefully (its processes end before the object goes)."""

from __future__ import annotations

import sys
from typing import Any

from plane_helpers import Plane, marker, processes_with

from kubetrain.kube.client import ApiError
from kubetrain.kube.kinds import POD


def bare_pod(name: str, container: dict[str, Any], restart_policy: str = "Never") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": "c", "image": "python:3.11", **container}],
        },
    }


async def _get(plane: Plane, name: str) -> dict[str, Any]:
    return await plane.api.get(POD.api_version, POD.plural, name, namespace="default")


async def test_a_pod_created_directly_is_scheduled_and_runs_its_args_as_the_command(
    plane: Plane,
) -> None:
    # args and no command: the image has no entrypoint, so args are the command.
    script = "import socket; print('hello from', socket.gethostname())"
    await plane.api.create(
        POD.api_version, POD.plural, bare_pod("hello", {"args": [sys.executable, "-c", script]})
    )

    async def done() -> dict[str, Any] | None:
        pod = await _get(plane, "hello")
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    pod = await plane.wait_for(done, timeout=30)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert pod["spec"]["nodeName"] == "kubetrain"
    assert pod["status"]["podIP"]
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True"
    assert conditions["Initialized"] == "True"
    (state,) = [c["state"] for c in pod["status"]["containerStatuses"]]
    assert state["terminated"]["exitCode"] == 0
    log = (plane.home / "logs" / "default" / "hello").rglob("*")
    assert any("hello from hello" in p.read_text() for p in log if p.is_file())
    reasons = {e["reason"] for e in await plane.events() if e["involvedObject"]["name"] == "hello"}
    assert {"Scheduled", "Started"} <= reasons


async def test_a_pod_that_fails_is_restarted_as_its_restart_policy_says(plane: Plane) -> None:
    await plane.api.create(
        POD.api_version,
        POD.plural,
        bare_pod("crash", {"command": [sys.executable, "-c", "raise SystemExit(3)"]}, "Always"),
    )

    async def restarted() -> dict[str, Any] | None:
        pod = await _get(plane, "crash")
        (status,) = pod["status"].get("containerStatuses") or [{}]
        return status if status.get("restartCount", 0) >= 2 else None

    status = await plane.wait_for(restarted, timeout=30)
    assert status["lastState"]["terminated"]["exitCode"] == 3


async def test_a_deleted_pod_stops_its_processes_before_it_goes(plane: Plane) -> None:
    tag = marker()
    command = [sys.executable, "-c", f"import time; time.sleep(600)  # {tag}"]
    await plane.api.create(POD.api_version, POD.plural, bare_pod("sleeper", {"command": command}))

    async def running() -> bool:
        pod = await _get(plane, "sleeper")
        return pod["status"].get("phase") == "Running" and bool(processes_with(tag))

    await plane.wait_for(running, timeout=30)
    await plane.api.delete(POD.api_version, POD.plural, "sleeper", namespace="default")

    async def gone() -> bool:
        try:
            await _get(plane, "sleeper")
        except ApiError as err:
            return err.code == 404
        return False

    await plane.wait_for(gone, timeout=20)
    assert processes_with(tag) == []


async def test_a_gated_pod_waits_until_its_scheduling_gates_are_removed(plane: Plane) -> None:
    gated = bare_pod("gated", {"command": [sys.executable, "-c", "print('ran')"]})
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    await plane.api.create(POD.api_version, POD.plural, gated)

    async def condition() -> dict[str, Any] | None:
        pod = await _get(plane, "gated")
        conds = pod["status"].get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    cond = await plane.wait_for(condition, timeout=20)
    assert (cond["status"], cond["reason"]) == ("False", "SchedulingGated")
    assert not (await _get(plane, "gated"))["spec"].get("nodeName")

    await plane.api.patch(
        POD.api_version,
        POD.plural,
        "gated",
        {"spec": {"schedulingGates": None}},
        namespace="default",
    )

    async def done() -> dict[str, Any] | None:
        pod = await _get(plane, "gated")
        return pod if pod["status"].get("phase") == "Succeeded" else None

    assert (await plane.wait_for(done, timeout=30))["spec"]["nodeName"] == "kubetrain"
