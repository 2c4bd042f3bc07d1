"""Sandboxed containers a test left running: found by their state files, killed.

Sandbox processes outlive whoever started them by design (a restarted daemon adopts them), so
a test that fails half-way would leave them behind. Imported by name: ``tests/`` is on
``sys.path`` under pytest.
"""

from __future__ import annotations

from pathlib import Path

from kubetrain.local.sandbox import ContainerProcess
from kubetrain.local.sandbox.state import read_states

__all__ = ["kill_leftover_containers"]


def kill_leftover_containers(root: Path) -> None:
    """Kill every container whose state file lies under ``root`` and is still running."""
    for state_dir in root.rglob("state"):
        for state in read_states(state_dir.parent):
            ContainerProcess.adopt(state).kill()
