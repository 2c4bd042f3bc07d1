"""The local daemon as the CLI and SDK see it: start, stop and status as plain data.

A thin layer over :mod:`kubetrain.local.daemon` that turns its errors into one-line
:class:`ClientError`\\ s and its records into dicts ready for a table or ``-o json``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubetrain.client.errors import ClientError

__all__ = ["daemon_report", "start", "stop"]

Home = str | Path | None


def daemon_report(home: Home = None) -> dict[str, Any]:
    """Whether a daemon runs for ``home``, where, since when, and a one-line ``summary``."""
    from kubetrain.local.daemon import daemon_status

    st = daemon_status(home)
    uptime = time.time() - st.started_at if st.started_at else None
    if st.ready:
        summary = f"running at {st.url} (pid {st.pid}, up {uptime or 0:.0f}s)"
    elif st.running:
        summary = f"starting (pid {st.pid}); log: {st.log}"
    else:
        summary = "not running (started on demand by kubetrain commands)"
    return {
        "home": str(st.home),
        "running": st.running,
        "ready": st.ready,
        "pid": st.pid,
        "url": st.url,
        "kubeconfig": str(st.kubeconfig) if st.kubeconfig else None,
        "context": "kubetrain-local",
        "log": str(st.log),
        "uptimeSeconds": round(uptime, 1) if uptime is not None else None,
        "summary": summary,
    }


def start(home: Home = None, timeout: float = 60.0) -> dict[str, Any]:
    """Start the daemon unless one answers already; its report."""
    from kubetrain.local.daemon import DaemonError, start_daemon

    try:
        start_daemon(home, timeout=timeout)
    except DaemonError as exc:
        raise ClientError(" ".join(str(exc).split("\n", 1)[0].split())) from None
    return daemon_report(home)


def stop(home: Home = None, *, kill_pods: bool = False) -> bool:
    """Stop the daemon; False when none was running. Pods survive unless ``kill_pods``."""
    from kubetrain.local.daemon import DaemonError, stop_daemon

    try:
        return stop_daemon(home, kill_pods=kill_pods)
    except DaemonError as exc:
        raise ClientError(str(exc)) from None
