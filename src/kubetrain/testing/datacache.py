"""A data cache (one head, N workers) as plain processes on loopback, for tests and benchmarks.

Each process is ``python -m kubetrain.datacache`` with the env the cache initializer gives its
pods, its own gRPC and health ports, and the head told its workers through ``CACHE_WORKERS``.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kubetrain.testing.processes import stop_process

__all__ = ["CacheCluster", "CacheProcess"]


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


# The ports distributed training listens on by default (torchrun's rendezvous 29400, torch's
# and DeepSpeed's store 29500): a cache kept for a whole test session must never hold one.
_TRAINING_PORTS = range(29_400, 29_600)


def _free_port(taken: set[int]) -> int:
    """A free port below the kernel's ephemeral range. A cache process keeps its ports across
    restarts, as a pod keeps its address; a port the kernel hands out (``bind(0)``, or the
    local end of any outgoing connection on the machine) could be taken by someone else while
    the process is down, or between this choice and the process's own bind."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 12_000), low)
        if port in taken or port in _TRAINING_PORTS:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))  # where the health server binds
            except OSError:
                continue
        taken.add(port)
        return port
    raise RuntimeError(f"no free port below {low}")


@dataclass
class CacheProcess:
    role: str
    port: int
    health_port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def location(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/ready", timeout=2
            ) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        stop_process(self.proc, 10)


class CacheCluster:
    """``workers`` cache workers and a head serving the Iceberg table ``schema.table`` at
    ``metadata_loc``; ``s3`` holds the S3 settings as AWS env variables."""

    def __init__(
        self,
        *,
        metadata_loc: str,
        schema: str,
        table: str,
        s3: Mapping[str, str],
        workers: int = 2,
        log_dir: Path,
    ) -> None:
        self.env = {
            **os.environ,
            **s3,
            "METADATA_LOC": metadata_loc,
            "SCHEMA_NAME": schema,
            "TABLE_NAME": table,
            "PYTHONUNBUFFERED": "1",
        }
        log_dir.mkdir(parents=True, exist_ok=True)
        taken: set[int] = set()
        self.workers = [
            CacheProcess(
                "worker", _free_port(taken), _free_port(taken), log_dir / f"worker-{i}.log"
            )
            for i in range(workers)
        ]
        self.head = CacheProcess("head", _free_port(taken), _free_port(taken), log_dir / "head.log")

    @property
    def endpoint(self) -> str:
        return self.head.location

    def _start(self, p: CacheProcess, extra: Mapping[str, str]) -> None:
        env = {**self.env, **extra, "HEALTH_PORT": str(p.health_port)}
        with p.log.open("ab") as out:
            p.proc = subprocess.Popen(
                [sys.executable, "-m", "kubetrain.datacache", p.role, "127.0.0.1", str(p.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def start_worker(self, index: int) -> None:
        self._start(self.workers[index], {})

    def start(self, timeout_s: float = 120.0) -> CacheCluster:
        for i in range(len(self.workers)):
            self.start_worker(i)
        workers = ",".join(w.location for w in self.workers)
        self._start(self.head, {"CACHE_WORKERS": workers})
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for p in [*self.workers, self.head]:
            while not p.ready():
                if p.proc is not None and p.proc.poll() is not None:
                    raise RuntimeError(
                        f"cache {p.role} exited with {p.proc.returncode}: {p.log.read_text()[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cache {p.role} not ready in {timeout_s} s: {p.log}")
                time.sleep(0.2)

    def stop(self) -> None:
        for p in [self.head, *self.workers]:
            p.stop()

    def __enter__(self) -> CacheCluster:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
