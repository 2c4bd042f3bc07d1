"""Issue 13, finding 4: a JobSet whose pods the API server refuses fails at once, with the
reason, instead of sitting without a condition forever (a bare Pod now runs:
test_bare_pods.py)."""

from __future__ import annotations

import sys

from plane_helpers import Plane, make_jobset

from kubetrain.kube.kinds import JOBSET


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
