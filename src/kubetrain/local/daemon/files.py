"""Where a daemon keeps its bookkeeping inside ``KUBETRAIN_HOME``, and how liveness is told.

- ``daemon.lock``: held (``flock``) by the running daemon for its whole life. The kernel drops
  the lock when the process dies, even by SIGKILL, so "is a daemon running?" never trusts a
  stale pid file.
- ``daemon.pid``: the daemon's pid (written once the lock is held).
- ``daemon.port``: the API server's port, written last: its presence means "ready".
- ``daemon.json``: url, pid, kubeconfig path and start time, written with the port.
- ``daemon.log``: the daemon's stdout and stderr.
- ``daemon.stop``: a stop request's options, read by the daemon on SIGTERM.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DaemonFiles", "lock_is_held"]


@dataclass(frozen=True)
class DaemonFiles:
    home: Path

    @property
    def lock(self) -> Path:
        return self.home / "daemon.lock"

    @property
    def pid(self) -> Path:
        return self.home / "daemon.pid"

    @property
    def port(self) -> Path:
        return self.home / "daemon.port"

    @property
    def info(self) -> Path:
        return self.home / "daemon.json"

    @property
    def log(self) -> Path:
        return self.home / "daemon.log"

    @property
    def stop_request(self) -> Path:
        return self.home / "daemon.stop"

    @property
    def kubeconfig(self) -> Path:
        return self.home / "kubeconfig"

    @property
    def token(self) -> Path:
        return self.home / "apiserver.token"

    def read_info(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.info.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def read_pid(self) -> int | None:
        try:
            return int(self.pid.read_text().strip())
        except (OSError, ValueError):
            return None

    def write_atomic(self, path: Path, text: str) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)

    def clear_ready(self) -> None:
        for path in (self.port, self.info, self.pid):
            with contextlib.suppress(OSError):
                path.unlink()


def lock_is_held(path: Path) -> bool:
    """True when some process holds the daemon lock at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
