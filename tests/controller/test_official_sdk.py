"""What the official ``kubeflow`` SDK (0.5.0) makes of the status and events the controller writes.

The SDK shows Complete/Failed only from a True condition of that type, needs
``lastTransitionTime`` on every condition, and drops events without ``firstTimestamp``
(kubeflow/sdk 0.5.0 kubeflow/trainer/backends/kubernetes/backend.py-6.2); these tests hold the controller to that.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from controller_plane import JOBSETS, Plane, condition, eventually

from kubetrain.api.types import Obj

pytest.importorskip("kubeflow.trainer")


def sdk(plane: Plane) -> Any:
    from kubeflow.trainer import KubernetesBackendConfig, TrainerClient

    return TrainerClient(
        KubernetesBackendConfig(namespace=plane.namespace, config_file=str(plane.kubeconfig))
    )


async def _status(plane: Plane, name: str, type_: str) -> Obj | None:
    return condition(await plane.trainjob_status(name), type_)


async def test_the_sdk_reads_a_completed_job_and_its_events(plane: Plane) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    await plane.set_jobset_status(
        "tj",
        {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                         "message": "jobset completed successfully",
                         "lastTransitionTime": "2026-11-29T09:00:00Z"}]},
    )  # fmt: skip
    await eventually(lambda: _status(plane, "tj", "Complete"), what="Complete")
    client = sdk(plane)

    job = await asyncio.to_thread(client.get_job, "tj")
    assert job.status == "Complete"
    events = await asyncio.to_thread(client.get_job_events, "tj")
    reasons = {e.reason for e in events if e.involved_object_kind == "TrainJob"}
    assert "Completed" in reasons


async def test_the_sdk_sees_a_job_that_cannot_render_as_failed(plane: Plane) -> None:
    await plane.spoil_snapshot("tj")
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: _status(plane, "tj", "Failed"), what="Failed")
    client = sdk(plane)

    job = await asyncio.to_thread(client.get_job, "tj")
    assert job.status == "Failed"
    with pytest.raises(RuntimeError, match="Failed"):
        await asyncio.to_thread(client.wait_for_job_status, "tj", {"Complete"}, 2, 1)
