"""The local daemon: API server + controller + executor for one ``KUBETRAIN_HOME``.

For the CLI and the SDK::

    info = ensure_daemon()          # DaemonInfo(url, token, kubeconfig, pid); starts one if needed
    daemon_status().running
    stop_daemon(kill_pods=False)    # pods keep running; the next daemon adopts them

The daemon process itself is ``python -m kubetrain.local.daemon --home DIR`` (`run_daemon`).
"""

from __future__ import annotations

from .control import (
    DaemonError,
    DaemonInfo,
    DaemonStatus,
    daemon_status,
    ensure_daemon,
    start_daemon,
    stop_daemon,
)
from .files import DaemonFiles
from .main import run_daemon

__all__ = [
    "DaemonError",
    "DaemonFiles",
    "DaemonInfo",
    "DaemonStatus",
    "daemon_status",
    "ensure_daemon",
    "run_daemon",
    "start_daemon",
    "stop_daemon",
]
