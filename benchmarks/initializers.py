"""Download throughput of kubetrain's S3 initializer against single-stream boto3, side by side,
and the server's own ceiling.

A local S3 server holds one large object and many small ones: ``--server s3rver`` (the
default; npm's s3rver, files on disk, a range costs its own length; kubetrain.testing.s3rver)
or ``--server moto`` (moto_server, in memory, reads the whole object for every ranged GET;
kubetrain.testing.s3). Each is fetched by:

- boto3, single stream (``aws s3 cp``-style without its parallel parts): a client of its own,
  then ``get_object`` and the body copied to a file, one object after another;
- the initializer (its S3 fetch, as ``kubetrain.initializers.run`` calls it, in this process,
  no cache): one listing, then a pool of presigned GETs (``--concurrency`` in flight); the
  large object starts as one stream and gets ranged streams only while they raise the rate;
- the server's ceiling: the cheapest client there is, plain urllib3 GETs of URLs presigned
  before the clock starts (``--concurrency`` connections); for the large object both one
  stream and ``--ranges`` parallel ranges, the better counting. No S3 client can fetch much
  faster than this from the same server on the same machine, so ``ceiling / boto3`` is about
  the most any client could show against it.

Rounds alternate them; the best of each is reported, as MB/s and the ratios, and the
initializer's ratio to boto3 within each round with their median: on a machine shared with
other work one quiet moment can make one run's best, and the two measured side by side,
seconds apart, see about the same load.

    .venv/bin/python benchmarks/initializers.py [--server s3rver|moto] [--size-mb 256]
        [--small 1000] [--small-kb 64] [--rounds 3]
    .venv/bin/python benchmarks/initializers.py --size-mb 1024     # the 1 GB object

Both servers and all clients share the machine's cores: on 2 cores the server's CPU per
request, not either client, sets much of the pace.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kubetrain.initializers.config import read_config
from kubetrain.initializers.s3 import CONCURRENCY, fetch_s3
from kubetrain.initializers.store import Store
from kubetrain.testing.s3 import S3Server
from kubetrain.testing.s3rver import S3rver

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
        if size_mb:
            client.upload_file(f.name, BUCKET, "large/object.bin")
    body = os.urandom(small_kb * 1024)
    for i in range(small):
        client.put_object(Bucket=BUCKET, Key=f"small/{i:05d}.bin", Body=body)


def _boto3_single_stream(server: Any, prefix: str, out: Path, _concurrency: int = 1) -> None:
    client = server.client()  # a client of its own, made inside the clock, as `aws s3 cp` does
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    for page in pages:
        for item in page.get("Contents") or []:
            dest = out / item["Key"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"]
            with dest.open("wb") as f:
                shutil.copyfileobj(body, f, MB)


def _initializer(server: Any, prefix: str, out: Path, concurrency: int) -> None:
    env = {
        "STORAGE_URI": f"s3://{BUCKET}/{prefix}",
        "ENDPOINT": server.endpoint,
        "ACCESS_KEY_ID": server.access_key_id,
        "SECRET_ACCESS_KEY": server.secret_access_key,
        # The dataset initializer ignores nothing by default (the model one skips *.bin).
    }
    # What `kubetrain.initializers.run` does for s3://, with the number in flight chosen here.
    fetch_s3(read_config("dataset", env), Store(out), concurrency=concurrency)


def _presigned(client: Any, prefix: str) -> list[tuple[str, str, int]]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [
        (
            item["Key"],
            client.generate_presigned_url(
                "get_object", Params={"Bucket": BUCKET, "Key": item["Key"]}
            ),
            int(item["Size"]),
        )
        for page in pages
        for item in page.get("Contents") or []
    ]


def _ceiling(urls: list[tuple[str, str, int]], out: Path, concurrency: int, ranges: int) -> None:
    """Presigned GETs, ``concurrency`` at once; an object in ``ranges`` parallel ranges."""
    from concurrent.futures import ThreadPoolExecutor

    import urllib3

    pool = urllib3.PoolManager(maxsize=concurrency)
    gets: list[tuple[Path, str, int, int]] = []
    for key, url, size in urls:
        dest = out / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        if ranges > 1:
            with dest.open("wb") as f:
                f.truncate(size)
        step = -(-size // ranges) if size else 1
        gets += [(dest, url, lo, min(lo + step, size)) for lo in range(0, max(size, 1), step)]

    def get(item: tuple[Path, str, int, int]) -> None:
        dest, url, lo, hi = item
        headers = {"Range": f"bytes={lo}-{hi - 1}"} if ranges > 1 else {}
        response = pool.request("GET", url, headers=headers, preload_content=False)
        assert response.status in (200, 206), response.status
        with dest.open("r+b" if ranges > 1 else "wb") as f:
            f.seek(lo)
            shutil.copyfileobj(response, f, MB)
        response.release_conn()

    with ThreadPoolExecutor(min(concurrency, len(gets))) as threads:
        list(threads.map(get, gets))


def _timed(fn: Callable[[Path], None], out: Path) -> tuple[float, tuple[float, float]]:
    """Wall seconds, and this process's CPU seconds, user and system (every thread; the server
    is another process, so this is the client's own CPU, which the machine's load changes far
    less than the wall time; the system part includes the file system's cost of the writes)."""
    start, cpu = time.perf_counter(), os.times()
    fn(out)
    end = os.times()
    return time.perf_counter() - start, (end.user - cpu.user, end.system - cpu.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("s3rver", "moto"), default="s3rver")
    parser.add_argument("--size-mb", type=int, default=256, help="the large object (1024 = 1 GB)")
    parser.add_argument("--small", type=int, default=1000, help="how many small objects")
    parser.add_argument("--small-kb", type=int, default=64, help="size of each small object")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="requests in flight (initializer)"
    )
    parser.add_argument("--ranges", type=int, default=4, help="the ceiling's ranges, large object")
    parser.add_argument("--only", choices=("large", "small"), help="run one of the two cases")
    args = parser.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    n = args.concurrency
    with (
        S3rver() if args.server == "s3rver" else S3Server() as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        client = server.client()
        print(
            f"uploading {args.size_mb} MB and {args.small} x {args.small_kb} KB to "
            f"{args.server} at {server.endpoint}"
        )
        _upload(
            client,
            0 if args.only == "small" else args.size_mb,
            0 if args.only == "large" else args.small,
            args.small_kb,
        )
        cases = [
            ("one large object", "large/", args.size_mb * MB),
            (f"{args.small} small objects", "small/", args.small * args.small_kb * 1024),
        ]
        for label, prefix, total in cases:
            if args.only and not prefix.startswith(args.only):
                continue
            urls = _presigned(client, prefix)
            runs: dict[str, Callable[[Path], None]] = {
                "boto3 single stream": lambda out, p=prefix: _boto3_single_stream(server, p, out),
                "initializer": lambda out, p=prefix: _initializer(server, p, out, n),
                "ceiling, one stream": lambda out, u=urls: _ceiling(u, out, n, 1),
            }
            if prefix == "large/":
                runs[f"ceiling, {args.ranges} ranges"] = lambda out, u=urls: _ceiling(
                    u, out, n, args.ranges
                )
            best = dict.fromkeys(runs, float("inf"))
            paired: list[float] = []  # the initializer / boto3 within each round
            cpu = dict.fromkeys(runs, (float("inf"), 0.0))
            print(f"\n{label} ({total / MB:.0f} MB), load average {os.getloadavg()[0]:.1f}:")
            for r in range(args.rounds):
                seen, took = [], {}
                for i, (name, fetch) in enumerate(runs.items()):
                    out = Path(tmp) / f"{r}-{i}"
                    seconds, cpu_s = _timed(fetch, out)
                    best[name] = min(best[name], seconds)
                    took[name] = seconds
                    cpu[name] = min(cpu[name], cpu_s, key=sum)
                    seen.append(f"{name} {total / MB / seconds:.1f}")
                    shutil.rmtree(out)
                paired.append(took["boto3 single stream"] / took["initializer"])
                print(f"  round {r + 1}: " + ", ".join(seen) + " MB/s")
            rates = {k: total / MB / v for k, v in best.items()}
            ceiling = max(v for k, v in rates.items() if k.startswith("ceiling"))
            print(f"best of {args.rounds} (load average now {os.getloadavg()[0]:.1f}):")
            objects = len(urls)
            # Per 1,000 objects where there are many, else for the fetch.
            per, unit = (1000 / objects, " per 1,000 objects") if objects > 1 else (1.0, "")
            for k, v in rates.items():
                user, system = (c * per for c in cpu[k])
                print(
                    f"  {k:<22} {v:8.1f} MB/s  ({best[k]:.2f} s; client CPU{unit}"
                    f" {user + system:.2f} s: user {user:.2f}, system {system:.2f})"
                )
            base = rates["boto3 single stream"]
            print(f"  initializer / boto3    {rates['initializer'] / base:8.2f}x")
            print(f"  ceiling / boto3        {ceiling / base:8.2f}x")
            rounds = ", ".join(f"{x:.2f}x" for x in paired)
            print(
                f"  initializer / boto3 within each round: {rounds} (median {median(paired):.2f}x)"
            )


if __name__ == "__main__":
    main()
