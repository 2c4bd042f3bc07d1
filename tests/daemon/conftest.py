"""A daemon per test, as a real detached process with its own KUBETRAIN_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemons import per_test_daemon


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from per_test_daemon(tmp_path)
