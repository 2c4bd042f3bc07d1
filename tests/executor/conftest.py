"""An embedded control plane without the controller: API server + executor, in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from plane_helpers import Plane

from kubetrain.kube.client import connect
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.executor.jobset_logic import Settings
from kubetrain.local.executor.loop import Executor
from kubetrain.local.executor.podrunner import RunnerSettings
from kubetrain.local.executor.scheduling import Resources
from kubetrain.local.executor.settings import ExecutorSettings


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine as a user gets it: the pod network where this machine allows one."""
    async for plane in _plane(tmp_path, pod_network=True):
        yield plane


@pytest.fixture
async def host_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine's fallback: pods share the host's network (and so its ports)."""
    async for plane in _plane(tmp_path, pod_network=False):
        yield plane


@pytest.fixture
async def small_node_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """A node of one cpu, 8 GiB and two (pretend) GPUs."""
    node = Resources(cpu_millis=1000, memory=8 * 1024**3, gpus=2)
    async for plane in _plane(tmp_path, pod_network=True, allocatable=node):
        yield plane


async def _plane(
    tmp_path: Path, *, pod_network: bool, allocatable: Resources | None = None
) -> AsyncIterator[Plane]:
    server = ApiServer(tmp_path, in_memory=True)
    await server.start()
    api = connect(server.write_kubeconfig())
    settings = ExecutorSettings(
        home=tmp_path,
        logic=Settings(pod_failure_backoff_s=0),
        runner=RunnerSettings(crash_backoff_s=0.1, crash_backoff_cap_s=0.2, setup_retry_s=0.2),
        max_grace_s=2.0,
        pod_network=pod_network,
        allocatable=allocatable,
    )
    executor = Executor(api, settings)
    await executor.start()
    try:
        yield Plane(api, tmp_path, executor, server)
    finally:
        await executor.stop(kill_pods=True)
        await api.close()
        await server.close()
