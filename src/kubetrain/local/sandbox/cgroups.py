"""Container limits with cgroups, as a kubelet enforces ``resources.limits``.

Each container with a memory or cpu limit gets a cgroup of its own,
``<root>/kubetrain/<home>/<pod uid>/<container>``: memory limit (no swap beyond it), and a
CFS quota of ``limit`` cpus per 100 ms period. The container joins its cgroups before its
program starts (a tiny ``sh`` prelude writes its own pid, then execs), so nothing it forks
escapes. A container the kernel's OOM killer hit is reported ``OOMKilled``, as containerd does.

Both hierarchies are supported: cgroup v1 (the ``memory`` and ``cpu`` controllers mounted
apart) and v2 (one tree; as root at its top, rootless in the daemon's own delegated cgroup).
Where neither can be written, `cgroup_probe` says why and limits are not enforced.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.quantity import quantity_milli_value, quantity_value

__all__ = ["CgroupProbe", "CgroupTree", "ContainerCgroup", "Limits", "cgroup_probe", "limits_of"]

_ROOT = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000


@dataclass(frozen=True)
class Limits:
    """A container's ``resources.limits``: bytes of memory, thousandths of a cpu."""

    memory: int | None = None
    cpu_millis: int | None = None

    def __bool__(self) -> bool:
        return self.memory is not None or self.cpu_millis is not None


def limits_of(container: Mapping[str, Any]) -> Limits:
    limits = obj_at(container, "resources", "limits")
    memory = limits.get("memory")
    cpu = limits.get("cpu")
    return Limits(
        quantity_value(memory) if memory is not None else None,
        quantity_milli_value(cpu) if cpu is not None else None,
    )


@dataclass
class ContainerCgroup:
    """The cgroup directories of one container (one per v1 controller, one on v2)."""

    version: int
    dirs: tuple[Path, ...]

    def prelude(self, argv: list[str]) -> list[str]:
        """``argv`` run after joining the cgroups."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in self.dirs)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]

    def oom_kills(self) -> int:
        """How many processes of this cgroup the OOM killer has killed so far (it counts
        across a container's restarts: compare with the count at its start)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        total = 0
        for d in self.dirs:
            try:
                text = (d / name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    total += int(value)
        return total

    def remove(self) -> None:
        """Remove the (empty) directories, and their pod's and home's when left empty
        (rmdir refuses a cgroup that still has children or processes)."""
        for d in self.dirs:
            for level in (d, d.parent, d.parent.parent):
                with contextlib.suppress(OSError):
                    level.rmdir()


@dataclass(frozen=True)
class CgroupTree:
    """Where this engine's cgroups go: v1 controller roots, or one v2 directory."""

    version: int
    roots: tuple[Path, ...]  # v1: (memory root, cpu root); v2: (kubetrain dir,)

    def create(
        self, home_key: str, pod_uid: str, container: str, limits: Limits
    ) -> ContainerCgroup:
        """The container's cgroups with ``limits`` written. Raises OSError."""
        dirs = []
        for root in self.roots:
            d = root / home_key / pod_uid / container
            d.mkdir(parents=True, exist_ok=True)
            dirs.append(d)
        if self.version == 1:
            memory, cpu = dirs
            if limits.memory is not None:
                (memory / "memory.limit_in_bytes").write_text(str(limits.memory))
                # No swap beyond the limit, as a kubelet on a node without swap.
                with contextlib.suppress(OSError):
                    (memory / "memory.swappiness").write_text("0")
                with contextlib.suppress(OSError):
                    (memory / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
            if limits.cpu_millis is not None:
                (cpu / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
                quota = max(1000, limits.cpu_millis * _PERIOD_US // 1000)
                (cpu / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            [d] = dirs
            if limits.memory is not None:
                (d / "memory.max").write_text(str(limits.memory))
                with contextlib.suppress(OSError):
                    (d / "memory.swap.max").write_text("0")
            if limits.cpu_millis is not None:
                quota = max(1000, limits.cpu_millis * _PERIOD_US // 1000)
                (d / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
        return ContainerCgroup(self.version, tuple(dirs))


@dataclass(frozen=True)
class CgroupProbe:
    tree: CgroupTree | None
    reason: str


def _v2_enable(directory: Path) -> None:
    """Let ``directory``'s children use the memory and cpu controllers."""
    (directory / "cgroup.subtree_control").write_text("+memory +cpu")


def _probe_v2() -> CgroupProbe:
    controllers = (_ROOT / "cgroup.controllers").read_text().split()
    if not {"memory", "cpu"} <= set(controllers):
        return CgroupProbe(None, "cgroup v2 without the memory and cpu controllers")
    if os.geteuid() == 0:
        base = _ROOT / "kubetrain"
    else:
        # Rootless: only below the daemon's own cgroup when systemd delegated it to the user.
        own = next(
            (line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
             if line.startswith("0::")), "",
        )  # fmt: skip
        base = _ROOT / own.strip().lstrip("/") / "kubetrain"
    try:
        if base.parent != _ROOT:
            _v2_enable(base.parent)
        base.mkdir(exist_ok=True)
        _v2_enable(base)
    except OSError as err:
        return CgroupProbe(None, f"cgroup v2 tree not writable here ({base}: {err.strerror})")
    return CgroupProbe(CgroupTree(2, (base,)), f"cgroup v2 at {base}")


def _probe_v1() -> CgroupProbe:
    memory, cpu = _ROOT / "memory", _ROOT / "cpu"
    if not memory.is_dir() or not cpu.is_dir():
        return CgroupProbe(None, "no cgroup v1 memory and cpu controllers mounted")
    roots = (memory / "kubetrain", cpu / "kubetrain")
    try:
        for root in roots:
            root.mkdir(exist_ok=True)
            if not os.access(root, os.W_OK):
                raise PermissionError(13, "Permission denied")
    except OSError as err:
        return CgroupProbe(None, f"cgroup v1 controllers not writable ({err.strerror})")
    return CgroupProbe(CgroupTree(1, roots), f"cgroup v1 at {roots[0]} and {roots[1]}")


@functools.cache
def cgroup_probe() -> CgroupProbe:
    """Where container limits can be enforced on this machine, probed once per process."""
    if os.environ.get("KUBETRAIN_CGROUPS", "").strip().lower() == "off":
        return CgroupProbe(None, "off by KUBETRAIN_CGROUPS=off")
    try:
        if (_ROOT / "cgroup.controllers").is_file():
            return _probe_v2()
        return _probe_v1()
    except OSError as err:
        return CgroupProbe(None, f"cgroups unreadable: {err}")
