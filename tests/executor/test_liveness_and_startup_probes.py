"""Liveness and startup probes on the local engine, as the kubelet runs them: a container that
fails its liveness probe (or never passes its startup probe) is killed, and its restart policy
says whether it starts again; readiness and liveness probes wait for the startup probe."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset

from kubetrain.kube.kinds import JOBSET

# The pod's emptyDir outlives its container's restarts: each run counts itself there, and only
# the runs from HEALTHY_FROM on (0: every run) create the file the probes look for.
CONTAINER = """
import pathlib, sys, time
scratch = pathlib.Path("/scratch")
runs = scratch / "runs"
run = len(runs.read_text()) if runs.exists() else 0
runs.write_text("x" * (run + 1))
if run >= int(sys.argv[1]):
    (scratch / "healthy").touch()
time.sleep(3600)
"""

# Succeeds while /scratch/healthy exists.
IS_HEALTHY = [PY, "-c", "import os, sys; sys.exit(not os.path.exists('/scratch/healthy'))"]

# Fails twice, then passes and creates /scratch/healthy: before it passes, nothing else that
# checks that file can succeed.
STARTS_ON_THIRD_TRY = [
    PY,
    "-c",
    "import pathlib, sys; p = pathlib.Path('/scratch/startup-tries'); "
    "n = len(p.read_text()) + 1 if p.exists() else 1; p.write_text('x' * n); "
    "n >= 3 and pathlib.Path('/scratch/healthy').touch(); sys.exit(n < 3)",
]


def probed_jobset(
    name: str, healthy_from: int, probes: dict[str, Any], restart_policy: str
) -> dict[str, Any]:
    # A Job counts its pods' restarts against backoffLimit: room for a few where they restart.
    js = make_jobset(
        name,
        [PY, "-c", CONTAINER, str(healthy_from)],
        pods=1,
        restart_policy=restart_policy,
        backoff_limit=6 if restart_policy == "OnFailure" else 0,
    )
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    container = pod_spec["containers"][0]
    container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    for field, probe in probes.items():
        container[field] = {"periodSeconds": 1, **probe}
    return js


async def events_of(plane: Plane, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in await plane.events()
        if e["involvedObject"]["name"].startswith(name)
    ]


async def test_a_container_failing_its_liveness_probe_is_killed_and_restarted_in_place(
    plane: Plane,
) -> None:
    liveness = {"exec": {"command": IS_HEALTHY}, "failureThreshold": 2}
    js = probed_jobset("live", 1, {"livenessProbe": liveness}, "OnFailure")
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)

    async def restarted() -> dict[str, Any] | None:
        pods = await plane.pods("live")
        statuses = pods[0].get("status", {}).get("containerStatuses") if pods else None
        if statuses and statuses[0]["restartCount"] == 1 and "running" in statuses[0]["state"]:
            return statuses[0]
        return None

    status = await plane.wait_for(restarted, timeout=60)
    # SIGTERM, as the kubelet sends first: 128 + 15.
    assert status["lastState"]["terminated"]["exitCode"] == 143
    events = await events_of(plane, "live")
    assert any(
        reason == "Unhealthy" and message.startswith("Liveness probe failed: ")
        for reason, message in events
    )
    assert ("Killing", "Container node failed liveness probe, will be restarted") in events
    # The second run is healthy: three probe periods on, its probe has killed nothing more.
    await asyncio.sleep(3)
    pod = (await plane.pods("live"))[0]
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1


@pytest.mark.parametrize(
    ("probes", "killed_for"),
    [
        pytest.param(
            {"livenessProbe": {"exec": {"command": IS_HEALTHY}, "failureThreshold": 1}},
            "liveness",
            id="a failed liveness probe",
        ),
        pytest.param(
            {"startupProbe": {"exec": {"command": IS_HEALTHY}, "failureThreshold": 2}},
            "startup",
            id="a startup probe that never passes",
        ),
    ],
)
async def test_under_restart_policy_never_a_killed_container_fails_its_pod(
    plane: Plane, probes: dict[str, Any], killed_for: str
) -> None:
    # Never healthy: healthy only from a run that never comes.
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, probed_jobset("dead", 9, probes, "Never")
    )

    async def failed() -> dict[str, Any] | None:
        pods = await plane.pods("dead")
        return pods[0] if pods and pods[0]["status"].get("phase") == "Failed" else None

    pod = await plane.wait_for(failed, timeout=60)
    status = pod["status"]["containerStatuses"][0]
    assert (status["restartCount"], status["state"]["terminated"]["exitCode"]) == (0, 143)
    events = await events_of(plane, "dead")
    assert ("Killing", f"Container node failed {killed_for} probe, will be restarted") in events


async def test_readiness_and_liveness_wait_for_the_startup_probe(plane: Plane) -> None:
    # Both fail until the startup probe's third try creates /scratch/healthy; a liveness probe
    # run before that (failure threshold 1) would kill the container.
    js = probed_jobset(
        "slow",
        9,
        {
            "startupProbe": {"exec": {"command": STARTS_ON_THIRD_TRY}, "failureThreshold": 10},
            "readinessProbe": {"exec": {"command": IS_HEALTHY}},
            "livenessProbe": {"exec": {"command": IS_HEALTHY}, "failureThreshold": 1},
        },
        "OnFailure",
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)

    async def ready() -> dict[str, Any] | None:
        pods = await plane.pods("slow")
        statuses = pods[0].get("status", {}).get("containerStatuses") if pods else None
        return statuses[0] if statuses and statuses[0]["ready"] else None

    status = await plane.wait_for(ready, timeout=60)
    assert (status["started"], status["restartCount"]) == (True, 0)
    reasons = [
        (reason, message.split(":")[0]) for reason, message in await events_of(plane, "slow")
    ]
    assert ("Unhealthy", "Startup probe failed") in reasons
    assert not any(
        reason == "Killing" or what == "Liveness probe failed" for reason, what in reasons
    )
