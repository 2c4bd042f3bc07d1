"""Shared test fixtures: where upstream's published data lives (read at run time, never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared() -> Path:
    """``../shared`` beside the checkout: upstream CRDs, runtimes and SDK TrainJob bodies."""
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: tests read upstream's published data from there")
    return SHARED
