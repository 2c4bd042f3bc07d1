"""Starting, finding and stopping the daemon from the CLI or the SDK (synchronous calls).

`ensure_daemon` is what every client calls first: it returns the running daemon's connection
details, starting a detached one when none runs. Two clients racing to start one are safe: the
loser's daemon finds the lock taken and exits, and both callers end up with the winner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .files import DaemonFiles, lock_is_held

__all__ = [
    "DaemonError",
    "DaemonInfo",
    "DaemonStatus",
    "daemon_status",
    "default_home",
    "ensure_daemon",
    "start_daemon",
    "stop_daemon",
]


class DaemonError(RuntimeError):
    """The daemon could not be started or stopped; the message says why (with its log tail)."""


@dataclass(frozen=True)
class DaemonInfo:
    """How to reach a running daemon."""

    home: Path
    url: str
    token: str
    kubeconfig: Path
    pid: int


@dataclass(frozen=True)
class DaemonStatus:
    home: Path
    running: bool
    # Running and answering: the port file is written and the port accepts connections.
    ready: bool
    pid: int | None
    url: str | None
    kubeconfig: Path | None
    log: Path
    started_at: float | None


def default_home() -> Path:
    """``$KUBETRAIN_HOME``, else ``~/.kubetrain`` (the API server's rule; not imported from it
    because that import alone costs the CLI half a second)."""
    return Path(os.environ.get("KUBETRAIN_HOME") or Path.home() / ".kubetrain")


def _home(home: Path | str | None) -> Path:
    return (
        Path(home).expanduser().resolve()
        if home is not None
        else default_home().expanduser().resolve()
    )


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def daemon_status(home: Path | str | None = None) -> DaemonStatus:
    """What runs for ``home`` (default ``$KUBETRAIN_HOME`` or ``~/.kubetrain``)."""
    files = DaemonFiles(_home(home))
    running = lock_is_held(files.lock)
    info = files.read_info() if running else None
    ready = False
    if info is not None and files.port.exists():
        ready = _port_open(int(info.get("port") or 0))
    return DaemonStatus(
        home=files.home,
        running=running,
        ready=ready,
        pid=files.read_pid() if running else None,
        url=str(info["url"]) if info and ready else None,
        kubeconfig=Path(str(info["kubeconfig"])) if info and ready else None,
        log=files.log,
        started_at=float(info["startedAt"]) if info and ready and "startedAt" in info else None,
    )


def _info(files: DaemonFiles, status: DaemonStatus) -> DaemonInfo:
    assert status.url is not None and status.kubeconfig is not None and status.pid is not None
    token = files.token.read_text().strip() if files.token.exists() else ""
    return DaemonInfo(files.home, status.url, token, status.kubeconfig, status.pid)


def _last_words(files: DaemonFiles) -> str:
    """The last line the latest start wrote to daemon.log: the reason, in one line (earlier
    starts' lines are not its reason)."""
    try:
        text = files.log.read_text(errors="replace").splitlines()
    except OSError:
        text = []
    starts = [i for i, line in enumerate(text) if line.startswith(_START_MARK)]
    tail = [line for line in (text[starts[-1] + 1 :] if starts else text) if line.strip()]
    if not tail:
        return f"it wrote nothing to {files.log}"
    return f"{tail[-1].strip()} (more in {files.log})" if len(tail) > 1 else tail[-1].strip()


_START_MARK = "--- starting daemon"


def _spawn(files: DaemonFiles) -> int:
    """Start the daemon detached: its own session, reparented away from the caller.

    A short-lived shell starts it in the background and exits, so the daemon never becomes a
    zombie child of a long-lived caller (a notebook using the SDK). The shell prints its pid.
    """
    files.home.mkdir(parents=True, exist_ok=True)
    with open(files.log, "ab") as log:
        log.write(f"{_START_MARK} at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        log.flush()
        argv = [sys.executable, "-m", "kubetrain.local.daemon", "--home", str(files.home)]
        shell = subprocess.run(
            ["/bin/sh", "-c", '"$@" </dev/null >&2 & echo $!', "sh", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "KUBETRAIN_HOME": str(files.home)},
            check=True,
        )
    return int(shell.stdout.decode().strip())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _exiting(files: DaemonFiles, child: int) -> bool:
    """Whether the lock still held after ``child``'s main thread ended is ``child``'s own.

    A daemon's main thread shows as a zombie while its other threads are still being torn
    down, and they share the lock's file descriptor: the lock stays held for that moment.
    The pid file, written once the lock is taken, tells that apart from another daemon
    having won the race (a loaded machine stretches the moment).
    """
    return files.read_pid() == child


def start_daemon(home: Path | str | None = None, *, timeout: float = 60.0) -> DaemonInfo:
    """Start a detached daemon (if none runs) and wait until it answers."""
    files = DaemonFiles(_home(home))
    if files.home.exists() and not files.home.is_dir():
        raise DaemonError(f"{files.home}: KUBETRAIN_HOME must be a directory, and this is a file")
    try:
        files.home.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DaemonError(f"{files.home}: cannot create KUBETRAIN_HOME: {err.strerror}") from None
    status = daemon_status(files.home)
    if status.ready:
        return _info(files, status)
    child = None if status.running else _spawn(files)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = daemon_status(files.home)
        if status.ready:
            return _info(files, status)
        if status.running and files.port.exists() and files.read_info() is None:
            # The daemon writes daemon.json before daemon.port: this one was damaged since.
            raise DaemonError(
                f"{files.info}: not a daemon description (damaged after the daemon started); "
                f"run `kubetrain daemon stop` and any command starts a fresh daemon"
            )
        if child is not None and not _alive(child):
            if not lock_is_held(files.lock):
                raise DaemonError(
                    f"the kubetrain daemon exited during start-up: {_last_words(files)}"
                )
            if not _exiting(files, child):
                child = None  # another client's daemon won the race: wait for that one
        time.sleep(0.05)
    raise DaemonError(
        f"the kubetrain daemon did not become ready within {timeout:.0f}s: {_last_words(files)}"
    )


def ensure_daemon(home: Path | str | None = None, *, timeout: float = 60.0) -> DaemonInfo:
    """The running daemon's connection details, starting one on demand."""
    return start_daemon(home, timeout=timeout)


def stop_daemon(
    home: Path | str | None = None, *, kill_pods: bool = False, timeout: float = 15.0
) -> bool:
    """Stop the daemon; True when one was running.

    Pods keep running and the next daemon adopts them, unless ``kill_pods``. A daemon that does
    not stop within ``timeout`` is killed (SIGKILL): recovery on the next start is designed for it.
    """
    files = DaemonFiles(_home(home))
    if not lock_is_held(files.lock):
        return False
    pid = files.read_pid()
    if pid is None:
        raise DaemonError(f"a daemon holds {files.lock} but wrote no pid file")
    files.write_atomic(files.stop_request, "kill-pods\n" if kill_pods else "keep-pods\n")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not lock_is_held(files.lock):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while lock_is_held(files.lock) and time.monotonic() < deadline + 5:
        time.sleep(0.05)
    return True
