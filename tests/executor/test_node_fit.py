"""The node: pods that do not fit wait Pending with the scheduler's reason; GPUs are whole."""

from __future__ import annotations

from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset

from kubetrain.kube.kinds import JOBSET, NODE

pytestmark = pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning")


def _requesting(js: dict[str, Any], requests: dict[str, Any]) -> dict[str, Any]:
    for rj in js["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c["resources"] = {
                "requests": requests,
                "limits": {"nvidia.com/gpu": requests["nvidia.com/gpu"]}
                if "nvidia.com/gpu" in requests
                else {},
            }
    return js


async def test_a_pod_that_does_not_fit_waits_pending_until_the_cpu_is_free(
    small_node_plane: Plane,
) -> None:
    plane = small_node_plane
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        _requesting(make_jobset("first", ["sleep", "1.5"], pods=1), {"cpu": "1"}),
    )

    async def first_running() -> bool:
        pods = await plane.pods("first")
        return bool(pods) and pods[0]["status"].get("phase") == "Running"

    await plane.wait_for(first_running)
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        _requesting(make_jobset("second", ["true"], pods=1), {"cpu": "500m"}),
    )

    cond = await plane.wait_for(lambda: plane.unschedulable("second"))
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    failed = [e for e in await plane.events() if e["reason"] == "FailedScheduling"]
    assert failed and failed[0]["source"]["component"] == "default-scheduler"
    assert "Insufficient cpu" in failed[0]["message"]
    assert (await plane.terminal("second"))["status"]["terminalState"] == "Completed"


async def test_gpus_go_to_pods_as_whole_devices_and_a_pod_without_any_sees_none(
    small_node_plane: Plane,
) -> None:
    plane = small_node_plane
    show = [
        PY,
        "-c",
        "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']), os.environ['NVIDIA_VISIBLE_DEVICES'])",
    ]
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        _requesting(make_jobset("gpu", show, pods=2), {"nvidia.com/gpu": 1}),
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, make_jobset("cpu", show, pods=1))
    logs = {}
    for name in ("gpu", "cpu"):
        done = await plane.terminal(name)
        for pod in await plane.pods(name):
            path = plane.home / "logs" / "default" / pod["metadata"]["name"] / "node.log"
            logs[pod["spec"]["hostname"]] = path.read_text().strip()
        assert done["status"]["terminalState"] == "Completed", logs
    assert sorted(logs[h] for h in ("gpu-node-0-0", "gpu-node-0-1")) == ["'0' 0", "'1' 1"]
    assert logs["cpu-node-0-0"] == "'' void"


async def test_the_node_is_registered_with_its_allocatable_resources(
    small_node_plane: Plane,
) -> None:
    node = await small_node_plane.api.get(NODE.api_version, NODE.plural, "kubetrain")
    assert node["status"]["allocatable"] == {
        "cpu": "1000m", "memory": str(8 * 1024**3), "nvidia.com/gpu": "2",
    }  # fmt: skip
    assert {"type": "Ready", "status": "True", "reason": "KubeletReady"} in node["status"][
        "conditions"
    ]
