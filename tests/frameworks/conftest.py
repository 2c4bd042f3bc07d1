"""Framework tests start real sandboxed processes; a test that fails half-way must still
leave nothing running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemons import per_test_daemon
from kubetrain.local.sandbox import ContainerProcess
from kubetrain.local.sandbox.state import read_states


@pytest.fixture(autouse=True)
def _no_leftover_processes(tmp_path: Path) -> Iterator[None]:
    # Depending on tmp_path makes this teardown run before tmp_path's.
    yield
    for state_dir in tmp_path.rglob("state"):
        for state in read_states(state_dir.parent):
            ContainerProcess.adopt(state).kill()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """The daemon tests' KUBETRAIN_HOME; its daemon stops after the test."""
    yield from per_test_daemon(tmp_path)
