"""Sandbox tests start real processes that, by design, outlive whoever started them; a test
that fails half-way must still leave nothing running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from leftover_processes import kill_leftover_containers


@pytest.fixture(autouse=True)
def _no_leftover_processes(tmp_path: Path) -> Iterator[None]:
    # Depending on tmp_path makes this teardown run before tmp_path's.
    yield
    kill_leftover_containers(tmp_path)
