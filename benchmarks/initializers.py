"""Download throughput of kubetrain's S3 initializer against single-stream boto3, side by side.

A local S3 server (moto's, in its own process; see kubetrain.testing.s3) holds one large object
and many small ones. Each is fetched by:

- boto3, single stream (``aws s3 cp``-style without its parallel parts): ``get_object`` and
  the body copied to a file, one object after another;
- the initializer (``kubetrain.initializers.run``, in this process, no cache): one listing,
  then every object through one s3transfer manager (16 requests in flight, 8 MB ranges).

Rounds alternate the two (A B A B ...); the best of each is reported, as MB/s and the ratio.

    .venv/bin/python benchmarks/initializers.py [--size-mb 256] [--small 1000] [--small-kb 64]
    .venv/bin/python benchmarks/initializers.py --size-mb 1024     # the 1 GB object

The server is the ceiling: moto answers in Python, so absolute MB/s says more about it than
about either client; the ratio is the figure to read.
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

from kubetrain.initializers import run
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


def _boto3_single_stream(client: Any, prefix: str, out: Path) -> None:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    for page in pages:
        for item in page.get("Contents") or []:
            dest = out / item["Key"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]
            with dest.open("wb") as f:
                shutil.copyfileobj(body, f, MB)


def _initializer(server: S3Server, prefix: str, out: Path) -> None:
    env = {
        "STORAGE_URI": f"s3://{BUCKET}/{prefix}",
        "ENDPOINT": server.endpoint,
        "ACCESS_KEY_ID": server.access_key_id,
        "SECRET_ACCESS_KEY": server.secret_access_key,
        # The dataset initializer ignores nothing by default (the model one skips *.bin).
    }
    run("dataset", env, out)


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
            best = {"boto3 single stream": float("inf"), "initializer": float("inf")}
            for r in range(args.rounds):
                out_a, out_b = Path(tmp) / f"a{r}", Path(tmp) / f"b{r}"
                best["boto3 single stream"] = min(
                    best["boto3 single stream"], _timed(_boto3_single_stream, client, prefix, out_a)
                )
                best["initializer"] = min(
                    best["initializer"], _timed(_initializer, server, prefix, out_b)
                )
                shutil.rmtree(out_a)
                shutil.rmtree(out_b)
            rates = {k: total / MB / v for k, v in best.items()}
            print(f"\n{label} ({total / MB:.0f} MB), best of {args.rounds}:")
            for k, v in rates.items():
                print(f"  {k:<20} {v:8.1f} MB/s  ({best[k]:.2f} s)")
            ratio = rates["initializer"] / rates["boto3 single stream"]
            print(f"  initializer / boto3  {ratio:8.2f}x")


if __name__ == "__main__":
    main()
