"""A real S3 server on loopback for tests, examples and benchmarks: moto's server mode.

Why moto and not a Debian S3 implementation: the one in Debian 12 is Ceph's ``radosgw``
16.2 (Pacific), whose standalone database store arrived only in Quincy (17); started here
with ``--rgw-backend-store=dbstore`` it still looks for Ceph monitors and exits
("Couldn't init storage provider (RADOS)"). ``moto_server`` is an S3 HTTP server in its own
process (SigV4 auth, ListObjectsV2, ranged GETs, multipart), kept in memory.

``python -m kubetrain.testing.s3 [--port N]`` runs one in the foreground and prints its
endpoint; `S3Server` starts one for a ``with`` block.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from kubetrain.testing.processes import stop_process, wait_answering

__all__ = ["ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "S3Server", "upload_dir"]

# Without ``auth`` moto accepts any key pair; these are the ones the examples send.
ACCESS_KEY_ID = "kubetrain"
SECRET_ACCESS_KEY = "kubetrain-secret"
# With ``auth``, the requests that create the IAM user, its policy and its key go unchecked.
_SETUP_ACTIONS = 3
_ALLOW_ALL = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}'


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class S3Server:
    """``moto_server`` on ``host``:``port`` (a free one by default) until the block ends.

    With ``auth`` the server checks credentials as S3 does (unknown access key, wrong secret)
    and `access_key_id` / `secret_access_key` are the only valid pair.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int | None = None, *, auth: bool = False
    ) -> None:
        self.host = host
        self.port = port or _free_port(host)
        self.endpoint = f"http://{host}:{self.port}"
        # What pods call it: the host's loopback is host.kubetrain.internal inside a pod.
        self.pod_endpoint = (
            f"http://host.kubetrain.internal:{self.port}" if host == "127.0.0.1" else self.endpoint
        )
        self.auth = auth
        self.access_key_id = ACCESS_KEY_ID
        self.secret_access_key = SECRET_ACCESS_KEY
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> S3Server:
        # Pods call it by a host name (host.kubetrain.internal): not a bucket subdomain.
        env = {
            **os.environ,
            "MOTO_ALLOW_NONEXISTENT_REGION": "true",
            "S3_IGNORE_SUBDOMAIN_BUCKETNAME": "true",
        }
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        wait_answering(self._proc, f"{self.endpoint}/moto-api/", "moto_server", timeout_s)
        if self.auth:
            self._make_user()
        return self

    def stop(self) -> None:
        stop_process(self._proc)
        self._proc = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The server answers nothing until the block ends (SIGSTOP, then SIGCONT): clients
        connect and wait, as against a stalled S3, and get their answers afterwards."""
        if self._proc is None:
            raise RuntimeError("the S3 server is not running")
        self._proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self._proc.send_signal(signal.SIGCONT)

    def _make_user(self) -> None:
        import boto3

        iam = boto3.session.Session().client(
            "iam", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY, region_name="us-east-1",
        )  # fmt: skip
        iam.create_user(UserName="kubetrain")
        iam.put_user_policy(UserName="kubetrain", PolicyName="all", PolicyDocument=_ALLOW_ALL)
        key = iam.create_access_key(UserName="kubetrain")["AccessKey"]
        self.access_key_id, self.secret_access_key = key["AccessKeyId"], key["SecretAccessKey"]

    def client(self) -> Any:
        import boto3

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name="us-east-1",
        )

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def upload_dir(client: Any, bucket: str, prefix: str, directory: Path) -> int:
    """Put every file below ``directory`` at ``prefix/<relative path>``; the count. Creates
    the bucket when missing."""
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=bucket)
    n = 0
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        key = f"{prefix.strip('/')}/{path.relative_to(directory).as_posix()}".lstrip("/")
        client.upload_file(str(path), bucket, key)
        n += 1
    return n


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kubetrain.testing.s3")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--auth", action="store_true", help="check credentials; print the key")
    args = parser.parse_args()
    server = S3Server(args.host, args.port, auth=args.auth).start()
    print(f"S3 endpoint {server.endpoint} (moto_server); Ctrl-C stops it", flush=True)
    if args.auth:
        print(f"ACCESS_KEY_ID={server.access_key_id}", flush=True)
        print(f"SECRET_ACCESS_KEY={server.secret_access_key}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while server._proc is not None and server._proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    _main()
