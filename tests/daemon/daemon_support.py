"""Helpers of the daemon tests: finding a pod's processes among the machine's."""

from __future__ import annotations

import os
import uuid


def command_line(pid: int) -> list[str]:
    """The arguments of process ``pid``; none once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode() for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def unique_sleep() -> str:
    """A ``sleep`` argument of about five minutes no other process on the machine has: the
    test finds its pod's processes by it."""
    return f"300.{uuid.uuid4().int % 10**9:09d}"


def sleeping(tag: str) -> list[int]:
    """The processes running exactly ``sleep tag``."""
    return [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and command_line(int(p)) == ["sleep", tag]
    ]


def processes_with(tag: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``tag``."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmd and state != "Z":
            out.append(int(pid))
    return out
