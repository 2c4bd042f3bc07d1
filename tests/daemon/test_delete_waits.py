"""Issue 13, finding 10: deleting a TrainJob waits until every process of it is gone, also
processes that ignore SIGTERM (the pods stay, terminating, until the kubelet has killed them)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from daemon_support import processes_with, unique_sleep

from kubetrain.client.connection import connect
from kubetrain.client.jobs import JobClient
from kubetrain.kube import client as kube
from kubetrain.kube.kinds import TRAINJOB
from kubetrain.local.daemon import ensure_daemon
from kubetrain.testing import make_trainjob


async def test_finding_10_delete_returns_only_after_processes_ignoring_sigterm_are_gone(
    home: Path,
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = kube.connect(info.kubeconfig)
    tag = unique_sleep()
    # Both the shell and its child ignore SIGTERM (an ignored signal survives fork and exec):
    # only the kubelet's SIGKILL after the grace period ends them.
    script = f"trap '' TERM; sleep {tag} & sleep {tag}; wait"
    trainjob = make_trainjob("stubborn").trainer(num_nodes=1, command=["sh", "-c", script]).obj()
    jobs = JobClient(connect(kubeconfig=info.kubeconfig, namespace="default"))
    try:
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        deadline = time.monotonic() + 180
        while len(processes_with(tag)) < 3:  # the shell and its two sleeps
            assert time.monotonic() < deadline, "the pod's processes never all started"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the trap is set before the sleeps start; let it settle
        start = time.monotonic()
        await asyncio.to_thread(jobs.delete_job, "stubborn", wait=True, timeout=60)
        took = time.monotonic() - start
        assert processes_with(tag) == [], f"delete returned after {took:.1f}s with processes alive"
        # They outlived SIGTERM: only the kill after the grace period ended them.
        assert took >= 1.0
    finally:
        jobs.close()
        await api.close()
