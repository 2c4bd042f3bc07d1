"""The local daemon: API server + controller + executor for one ``KUBETRAIN_HOME``.

For the CLI and the SDK::

    info = ensure_daemon()          # DaemonInfo(url, token, kubeconfig, pid); starts one if needed
    daemon_status().running
    stop_daemon(kill_pods=False)    # pods keep running; the next daemon adopts them

The daemon process itself is ``python -m kubetrain.local.daemon --home DIR`` (`run_daemon`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .control import (
    DaemonError,
    DaemonInfo,
    DaemonStatus,
    daemon_status,
    default_home,
    ensure_daemon,
    start_daemon,
    stop_daemon,
)
from .files import DaemonFiles

if TYPE_CHECKING:  # pragma: no cover
    from .main import run_daemon

__all__ = [
    "DaemonError",
    "DaemonFiles",
    "DaemonInfo",
    "DaemonStatus",
    "daemon_status",
    "default_home",
    "ensure_daemon",
    "run_daemon",
    "start_daemon",
    "stop_daemon",
]


def __getattr__(name: str) -> Any:
    # The daemon process's entry point pulls in the API server, executor and controller;
    # clients that only find or start a daemon never pay for those imports.
    if name == "run_daemon":
        from .main import run_daemon

        return run_daemon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
