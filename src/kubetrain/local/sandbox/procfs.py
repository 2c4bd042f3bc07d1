"""Finding and killing a container's processes through /proc.

A container's processes are the tree under the process we started plus anything still in
its process group. The tree matters because torchrun starts its workers in new sessions, so
a process-group kill alone would miss them in plain mode; in bwrap mode the PID namespace
already guarantees that killing its init ends every process inside.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

__all__ = ["ProcInfo", "descendants", "proc_info", "processes_of", "signal_all"]


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    state: str
    start_time: int  # clock ticks after boot: with pid, identifies a process across reuse
    comm: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            raw = f.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: split at the last ')'.
    head, _, rest = raw.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    return ProcInfo(
        pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0],
        start_time=int(fields[19]), comm=comm,
    )  # fmt: skip


def _all() -> list[ProcInfo]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                out.append(info)
    return out


def descendants(root: int, infos: list[ProcInfo] | None = None) -> list[ProcInfo]:
    """Every live process below ``root`` (not ``root`` itself), parents first."""
    infos = _all() if infos is None else infos
    children: dict[int, list[ProcInfo]] = {}
    for p in infos:
        children.setdefault(p.ppid, []).append(p)
    out: list[ProcInfo] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            out.append(child)
            queue.append(child.pid)
    return out


def processes_of(pid: int, pgid: int, since: int) -> list[ProcInfo]:
    """The container's live processes: ``pid`` itself, its tree, and its group.

    Group members must have started no earlier than ``since`` (the root's start time), so a
    recycled group id after a daemon restart never points at a stranger.
    """
    infos = _all()
    found: dict[int, ProcInfo] = {}
    root = next((p for p in infos if p.pid == pid), None)
    if root is not None and root.start_time == since:
        found[pid] = root
        for p in descendants(pid, infos):
            found[p.pid] = p
    for p in infos:
        if p.pgid == pgid and p.start_time >= since and p.pid not in found:
            found[p.pid] = p
            for d in descendants(p.pid, infos):
                found[d.pid] = d
    return [p for p in found.values() if p.state not in ("Z", "X")]


def signal_all(procs: list[ProcInfo], sig: signal.Signals) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, sig)
