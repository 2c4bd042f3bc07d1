"""Issue 13, finding 4: a JobSet whose pods the API server refuses fails at once, with the
reason, instead of sitting without a condition forever; a bare Pod is told it will not run."""

from __future__ import annotations

import sys
from typing import Any

from plane_helpers import Plane, make_jobset

from kubetrain.kube.kinds import JOBSET, POD


async def test_finding_4_a_jobset_whose_pods_cannot_be_created_fails_within_seconds(
    plane: Plane,
) -> None:
    # 58 characters: the JobSet is a valid object, but the Job name label of its pods,
    # <name>-node-0, has 65 characters (upstream kubeflow/trainer#2735).
    name = "x" * 58
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, make_jobset(name, [sys.executable, "-c", "pass"])
    )
    jobset = await plane.terminal(name, timeout=10)
    failed = [c for c in jobset["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True"
    assert failed[0]["reason"] == "PodCreationFailed"
    assert "cannot be created" in failed[0]["message"] and "metadata.labels" in failed[0]["message"]
    assert await plane.pods(name) == []


async def test_finding_4_a_bare_pod_is_told_at_once_that_the_local_engine_will_not_run_it(
    plane: Plane,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "python:3.11", "command": ["true"]}]},
    }
    await plane.api.create(POD.api_version, POD.plural, pod)

    async def scheduled_condition() -> dict[str, Any] | None:
        got = await plane.api.get(POD.api_version, POD.plural, "bare", namespace="default")
        conds = (got.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    cond = await plane.wait_for(scheduled_condition, timeout=10)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "runs only pods of JobSets" in cond["message"]

    async def warning() -> list[dict[str, Any]]:
        return [
            e
            for e in await plane.events()
            if e["involvedObject"].get("name") == "bare" and e["type"] == "Warning"
        ]

    (event,) = await plane.wait_for(warning, timeout=10)
    assert event["reason"] == "FailedScheduling"
    assert "runs only pods of JobSets" in event["message"]
    got = await plane.api.get(POD.api_version, POD.plural, "bare", namespace="default")
    assert got["status"]["phase"] == "Pending"
