"""Download throughput of kubetrain's S3 initializer against single-stream boto3, side by side,
and the server's own ceiling.

A local S3 server (moto's, in its own process; see kubetrain.testing.s3) holds one large object
and many small ones. Each is fetched by:

- boto3, single stream (``aws s3 cp``-style without its parallel parts): a client of its own,
  then ``get_object`` and the body copied to a file, one object after another;
- the initializer (its S3 fetch, as ``kubetrain.initializers.run`` calls it, in this process,
  no cache): one listing,
  then a pool of ``GetObject`` calls (``--concurrency`` in flight; byte ranges of 64 MB+ for
  objects of 256 MB+);
- the server's ceiling: the cheapest client there is, plain urllib3 GETs of URLs presigned
  before the clock starts (``--concurrency`` connections; one stream for the large object).
  No S3 client can fetch faster than this from the same server on the same machine, so
  ``ceiling / boto3`` is the most any client could show against it.

Rounds alternate the three; the best of each is reported, as MB/s and the ratios.

    .venv/bin/python benchmarks/initializers.py [--size-mb 256] [--small 1000] [--small-kb 64]
    .venv/bin/python benchmarks/initializers.py --size-mb 1024     # the 1 GB object

moto answers in Python, one process: its CPU per request, not either client, sets the pace.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kubetrain.initializers.config import read_config
from kubetrain.initializers.s3 import CONCURRENCY, fetch_s3
from kubetrain.initializers.store import Store
from kubetrain.testing.s3 import S3Server

__all__ = ["main"]

BUCKET = "bench"
MB = 1024 * 1024


def _upload(client: Any, size_mb: int, small: int, small_kb: int) -> None:
    client.create_bucket(Bucket=BUCKET)
    block = os.urandom(MB)
    with tempfile.NamedTemporaryFile() as f:
        for _ in range(size_mb):
            f.write(block)
        f.flush()
        client.upload_file(f.name, BUCKET, "large/object.bin")
    body = os.urandom(small_kb * 1024)
    for i in range(small):
        client.put_object(Bucket=BUCKET, Key=f"small/{i:05d}.bin", Body=body)


def _boto3_single_stream(server: S3Server, prefix: str, out: Path, _concurrency: int = 1) -> None:
    client = server.client()  # a client of its own, made inside the clock, as `aws s3 cp` does
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    for page in pages:
        for item in page.get("Contents") or []:
            dest = out / item["Key"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]
            with dest.open("wb") as f:
                shutil.copyfileobj(body, f, MB)


def _initializer(server: S3Server, prefix: str, out: Path, concurrency: int) -> None:
    env = {
        "STORAGE_URI": f"s3://{BUCKET}/{prefix}",
        "ENDPOINT": server.endpoint,
        "ACCESS_KEY_ID": server.access_key_id,
        "SECRET_ACCESS_KEY": server.secret_access_key,
        # The dataset initializer ignores nothing by default (the model one skips *.bin).
    }
    # What `kubetrain.initializers.run` does for s3://, with the number in flight chosen here.
    fetch_s3(read_config("dataset", env), Store(out), concurrency=concurrency)


def _presigned(client: Any, prefix: str) -> list[tuple[str, str]]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [
        (
            item["Key"],
            client.generate_presigned_url(
                "get_object", Params={"Bucket": BUCKET, "Key": item["Key"]}
            ),
        )
        for page in pages
        for item in page.get("Contents") or []
    ]


def _ceiling(urls: list[tuple[str, str]], out: Path, concurrency: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import urllib3

    pool = urllib3.PoolManager(maxsize=concurrency)

    def get(item: tuple[str, str]) -> None:
        key, url = item
        dest = out / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        response = pool.request("GET", url, preload_content=False)
        assert response.status == 200, response.status
        with dest.open("wb") as f:
            shutil.copyfileobj(response, f, MB)
        response.release_conn()

    with ThreadPoolExecutor(min(concurrency, len(urls))) as threads:
        list(threads.map(get, urls))


def _timed(fn: Any, *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256, help="the large object (1024 = 1 GB)")
    parser.add_argument("--small", type=int, default=1000, help="how many small objects")
    parser.add_argument("--small-kb", type=int, default=64, help="size of each small object")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="requests in flight (initializer)"
    )
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    with S3Server() as server, tempfile.TemporaryDirectory() as tmp:
        client = server.client()
        print(
            f"uploading {args.size_mb} MB and {args.small} x {args.small_kb} KB to {server.endpoint}"
        )
        _upload(client, args.size_mb, args.small, args.small_kb)
        cases = [
            ("one large object", "large/", args.size_mb * MB),
            (f"{args.small} small objects", "small/", args.small * args.small_kb * 1024),
        ]
        for label, prefix, total in cases:
            urls = _presigned(client, prefix)
            runs: dict[str, tuple[Any, tuple[Any, ...]]] = {
                "boto3 single stream": (_boto3_single_stream, (server, prefix)),
                "initializer": (_initializer, (server, prefix)),
                "server ceiling": (_ceiling, (urls,)),
            }
            best = dict.fromkeys(runs, float("inf"))
            for r in range(args.rounds):
                for name, (fetch, head) in runs.items():
                    out = Path(tmp) / f"{r}-{len(name)}"
                    best[name] = min(best[name], _timed(fetch, *head, out, args.concurrency))
                    shutil.rmtree(out)
            rates = {k: total / MB / v for k, v in best.items()}
            print(f"\n{label} ({total / MB:.0f} MB), best of {args.rounds}:")
            for k, v in rates.items():
                print(f"  {k:<20} {v:8.1f} MB/s  ({best[k]:.2f} s)")
            base = rates["boto3 single stream"]
            print(f"  initializer / boto3  {rates['initializer'] / base:8.2f}x")
            print(f"  ceiling / boto3      {rates['server ceiling'] / base:8.2f}x")


if __name__ == "__main__":
    main()
