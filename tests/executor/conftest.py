"""An embedded control plane without the controller: API server + executor, in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from plane_helpers import Plane, fast_settings, running_plane

from kubetrain.local.executor.scheduling import Resources


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine as a user gets it: the pod network where this machine allows one."""
    async with running_plane(tmp_path, fast_settings(tmp_path, pod_network=True)) as plane:
        yield plane


@pytest.fixture
async def host_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine's fallback: pods share the host's network (and so its ports)."""
    async with running_plane(tmp_path, fast_settings(tmp_path, pod_network=False)) as plane:
        yield plane


@pytest.fixture
async def small_node_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """A node of one cpu, 8 GiB and two (pretend) GPUs."""
    node = Resources(cpu_millis=1000, memory=8 * 1024**3, gpus=2)
    settings = fast_settings(tmp_path, pod_network=True, allocatable=node)
    async with running_plane(tmp_path, settings) as plane:
        yield plane
