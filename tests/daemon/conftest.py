"""A daemon per test, as a real detached process with its own KUBETRAIN_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.local.daemon import stop_daemon


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "home"
    try:
        yield path
    finally:
        stop_daemon(path, kill_pods=True, timeout=10)
