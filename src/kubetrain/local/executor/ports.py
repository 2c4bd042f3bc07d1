"""Declared container ports on a machine where every pod shares the host's port space.

On a cluster each pod has its own network namespace. Here pods only have their own loopback
address, and a process that binds the wildcard address (torchrun's TCPStore binds ``*:29500``)
takes the port on every address: a second job's master could not bind it, and its workers would
reach the first job's store instead. So a JobSet holds the ports its pods declare
(``containerPort``/``hostPort``) from its first started pod until its last one ends; a pod of
another JobSet that declares a held port, or a port some other process on this machine listens
on, waits Pending (``PodScheduled=False``, reason Unschedulable), as a pod waits on a cluster for
a node with a free host port.

A port is free when it can be bound on the pod's address *and* on the wildcard, since the pod's
process may bind either. A port free on the pod's own address may still be taken elsewhere: by a
listener on another address, or, for TCP's TIME_WAIT (60 s), by the closed connections of a
listener that set no SO_REUSEADDR (XGBoost's Rabit tracker leaves those on rank 0's address
after every job); a wildcard bind then fails, so the next torch job's store would.

Daemons of different homes on one machine coordinate through one lock file per port in a
machine-wide directory: the holder keeps an exclusive ``flock`` on it, which the kernel drops
when that daemon dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubetrain.api.access import dicts, obj_at

__all__ = ["WILDCARD", "PortGate", "declared_ports", "default_lock_dir", "port_is_free"]

# The address a server binds to listen on every address (torch's TCPStore does).
WILDCARD = "0.0.0.0"


def declared_ports(pod: Mapping[str, Any]) -> set[int]:
    spec = obj_at(pod, "spec")
    out: set[int] = set()
    for c in [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]:
        for port in dicts(c.get("ports")):
            for key in ("containerPort", "hostPort"):
                value = port.get(key)
                if isinstance(value, int) and 0 < value < 65536:
                    out.add(value)
    return out


def port_is_free(ip: str, port: int) -> bool:
    """Whether a listener could bind ``ip:port`` now (SO_REUSEADDR, as servers set it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((ip, port))
        except OSError:
            return False
    return True


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"kubetrain-ports-{os.getuid()}"


class PortGate:
    """Which JobSet holds which declared port."""

    def __init__(self, lock_dir: Path | None = None) -> None:
        self.owners: dict[int, str] = {}  # port → JobSet uid
        self.names: dict[str, str] = {}  # JobSet uid → "namespace/name", for messages
        self.lock_dir = lock_dir or default_lock_dir()
        self._locks: dict[int, int] = {}  # port → fd holding its machine-wide lock

    def _lock(self, port: int) -> bool:
        """Take the machine-wide lock of ``port``; False when another daemon holds it."""
        if port in self._locks:
            return True
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_dir / f"{port}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._locks[port] = fd
        return True

    def _unlock(self, port: int) -> None:
        fd = self._locks.pop(port, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def blocked(self, owner: str, ports: Iterable[int], ip: str) -> str | None:
        """Why a pod of ``owner`` declaring ``ports`` cannot start now, or None.

        On None, the machine-wide locks of the ports are held (`claim` records the owner).
        """
        taken: list[int] = []
        why = None
        for port in sorted(ports):
            holder = self.owners.get(port)
            if holder == owner:
                continue  # its own JobSet's master may well be listening on it
            if holder is not None:
                why = (
                    f"port {port} is held by JobSet {self.names.get(holder, holder)} on this machine "
                    "(pods share the host's ports); waiting for it to finish"
                )
            elif not (port_is_free(ip, port) and port_is_free(WILDCARD, port)):
                why = (
                    f"port {port} is in use by another process on this machine (a listener, or "
                    "closed connections in TCP TIME_WAIT); waiting for it to be free"
                )
            elif port not in self._locks:
                if not self._lock(port):
                    why = f"port {port} is held by a job of another kubetrain home on this machine; waiting for it"
                else:
                    taken.append(port)
            if why is not None:
                for port in taken:
                    self._unlock(port)
                return why
        return None

    def claim(self, owner: str, name: str, ports: Iterable[int]) -> None:
        self.names[owner] = name
        for port in ports:
            if self.owners.setdefault(port, owner) == owner:
                self._lock(port)  # best effort: an adopted pod's port may be locked elsewhere

    def close(self) -> None:
        """Give every port back (the executor stops)."""
        for port in list(self._locks):
            self._unlock(port)
        self.owners.clear()
        self.names.clear()

    def release(self, owner: str) -> bool:
        """Free every port ``owner`` holds; True when any was held."""
        held = [p for p, o in self.owners.items() if o == owner]
        for port in held:
            del self.owners[port]
            self._unlock(port)
        self.names.pop(owner, None)
        return bool(held)
