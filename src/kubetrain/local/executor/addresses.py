"""Loopback addresses for pods: one stable address per pod hostname of a JobSet.

Every JobSet gets a block of consecutive addresses, one per pod hostname its spec can produce
(``<jobset>-<rjob>-<job>-<index>``), so a pod keeps its address across restarts and every
pod's /etc/hosts can name all its peers before they exist. Blocks are written to a small JSON
file so that a restarted daemon never hands out an address an adopted pod still uses.

Blocks start at an offset derived from the file's path: two homes on one machine (a test run
beside a user's daemon) then use different addresses instead of both starting at 127.0.0.2.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from kubetrain.local.sandbox import loopback_address, pod_dns_names

from .jobs import job_name
from .spec import JobSetSpec

__all__ = ["AddressBook", "pod_hostnames"]


def pod_hostnames(spec: JobSetSpec) -> list[str]:
    """Every pod hostname the JobSet can have, in spec order."""
    return [
        f"{job_name(spec.name, r.name, j)}-{i}"
        for r in spec.replicated_jobs
        for j in range(r.replicas)
        for i in range(r.completions)
    ]


class AddressBook:
    """JobSet uid → (first index, count) in the loopback range, persisted at ``path``."""

    def __init__(
        self, path: Path, base: int | None = None, address: Callable[[int], str] = loopback_address
    ) -> None:
        """``address``: index → IP (loopback addresses, or the pod network's bridge addresses,
        which belong to this home alone and so start at ``base`` 0)."""
        self.path = path
        self.address = address
        if base is None:
            digest = hashlib.sha1(str(path.resolve()).encode()).digest()
            # Whole /24s, below the top of 127/8 with room for many blocks after the base.
            base = int.from_bytes(digest[:4], "big") % 60_000 * 254
        self.base = base
        self.blocks: dict[str, tuple[int, int]] = {}
        try:
            raw = json.loads(path.read_text())
            self.blocks = {str(k): (int(v[0]), int(v[1])) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError):
            self.blocks = {}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.blocks))
        os.replace(tmp, self.path)

    def block(self, uid: str, count: int) -> int:
        """The first index of the JobSet's block, allocating (first fit) on first use."""
        have = self.blocks.get(uid)
        if have is not None and have[1] >= count:
            return have[0]
        start = 0
        for first, size in sorted(b for k, b in self.blocks.items() if k != uid):
            if start + count <= first:
                break
            start = max(start, first + size)
        self.blocks[uid] = (start, count)
        self._save()
        return start

    def release(self, uid: str) -> None:
        if self.blocks.pop(uid, None) is not None:
            self._save()

    def hosts(self, spec: JobSetSpec) -> tuple[dict[str, str], dict[str, str]]:
        """(DNS name → address for every pod name form, hostname → address)."""
        names = pod_hostnames(spec)
        first = self.block(spec.uid, len(names))
        by_host = {h: self.address(self.base + first + i) for i, h in enumerate(names)}
        dns: dict[str, str] = {}
        subdomain = spec.subdomain if spec.dns_hostnames else None
        for host, ip in by_host.items():
            for name in pod_dns_names(host, subdomain, spec.namespace):
                dns[name] = ip
        return dns, by_host
