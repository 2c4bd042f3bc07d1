"""A daemon that serves a whole test module: started once in a fresh KUBETRAIN_HOME, stopped
with its pods killed when the module is done.

Imported by name: ``tests/`` is on ``sys.path`` under pytest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def module_daemon(
    tmp_path_factory: pytest.TempPathFactory, *, engine_yaml: str | None = None
) -> Iterator[Path]:
    """The body of a module-scoped ``home`` fixture; ``engine_yaml``: the engine's settings."""
    from kubetrain.local.daemon import start_daemon, stop_daemon

    home = tmp_path_factory.mktemp("kthome")
    if engine_yaml is not None:
        (home / "engine.yaml").write_text(engine_yaml)
    start_daemon(home)
    try:
        yield home
    finally:
        stop_daemon(home, kill_pods=True)


def per_test_daemon(tmp_path: Path) -> Iterator[Path]:
    """The body of a test-scoped ``home`` fixture: a KUBETRAIN_HOME whose daemon, if the test
    started one, is stopped with its pods killed after the test."""
    from kubetrain.local.daemon import stop_daemon

    path = tmp_path / "home"
    try:
        yield path
    finally:
        stop_daemon(path, kill_pods=True, timeout=10)
