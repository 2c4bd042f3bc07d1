"""A second local S3 server, for throughput measurements: ``s3rver`` (npm), files on disk.

Why a second one: moto (`kubetrain.testing.s3`) reads a whole object for every ranged GET, so
against it parallel ranges cost the object's size each and a benchmark of large objects
measures that, not the client. s3rver serves each object from a file, a range as a read of
that range (an 8 MB range of a 128 MB object in about 40 ms here), over keep-alive
connections. It was the only S3 server found that installs here by package name and starts
alone: no MinIO, SeaweedFS, Garage or versitygw build is packaged on PyPI, npm or Debian, and
Debian 12's Ceph ``radosgw`` (16.2) needs Ceph monitors (see `kubetrain.testing.s3`).

What it is not: it parses SigV4 but does not check the signature (an unknown access key is
refused, a wrong secret is not), and it has one key pair, ``S3RVER``/``S3RVER``. So the tests,
which check credential errors, keep moto; this one serves the benchmark.

It is installed on first use with npm (``s3rver@3.7.1``) into ``~/.cache/kubetrain/s3rver``
(``$XDG_CACHE_HOME`` if set); Node.js and npm come from Debian (``scripts/install.sh --dev``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from kubetrain.testing.processes import stop_process, wait_answering

__all__ = ["S3RVER_VERSION", "S3rver", "install_s3rver"]

S3RVER_VERSION = "3.7.1"
_KEY = "S3RVER"  # s3rver's one account: access key and secret alike


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kubetrain" / "s3rver"


def install_s3rver(prefix: Path | None = None) -> Path:
    """The s3rver executable, installed with npm first if it is not there yet."""
    prefix = prefix or _cache_dir()
    binary = prefix / "node_modules" / ".bin" / "s3rver"
    if binary.is_file():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError(
            "s3rver needs Node.js and npm: apt-get install nodejs npm "
            "(scripts/install.sh --dev installs them)"
        )
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
         f"s3rver@{S3RVER_VERSION}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not binary.is_file():
        raise RuntimeError(f"npm install s3rver@{S3RVER_VERSION} failed: {done.stderr.strip()}")
    return binary


class S3rver:
    """s3rver on ``host``:``port`` (a free one by default), its files in a temporary
    directory, until the block ends."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        if port is None:
            with socket.socket() as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
        self.host, self.port = host, port
        self.endpoint = f"http://{host}:{port}"
        self.access_key_id = self.secret_access_key = _KEY
        self._proc: subprocess.Popen[bytes] | None = None
        self._data: tempfile.TemporaryDirectory[str] | None = None

    def start(self, timeout_s: float = 30.0) -> S3rver:
        binary = install_s3rver()
        self._data = tempfile.TemporaryDirectory(prefix="kubetrain-s3rver-")
        self._proc = subprocess.Popen(
            [str(binary), "-d", self._data.name, "-a", self.host, "-p", str(self.port),
             "--silent", "--no-vhost-buckets"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            wait_answering(self._proc, self.endpoint, "s3rver", timeout_s)
        except RuntimeError:
            self.stop()  # its data directory too
            raise
        return self

    def stop(self) -> None:
        stop_process(self._proc)
        self._proc = None
        if self._data is not None:
            self._data.cleanup()
            self._data = None

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )

    def __enter__(self) -> S3rver:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
