"""The ports a test session's data cache keeps for its whole life."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from kubetrain.testing import datacache


@pytest.mark.parametrize("port", [29400, 29500, 29599], ids=lambda p: f"{p} is skipped")
def test_a_port_distributed_training_listens_on_by_default_is_never_kept(
    monkeypatch: pytest.MonkeyPatch, port: int
) -> None:
    offered: Iterator[int] = iter([port, 29_399])
    monkeypatch.setattr(random, "randrange", lambda *_: next(offered))
    assert datacache._free_port(set()) == 29_399
