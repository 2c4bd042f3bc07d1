"""The data cache against every rank reading Parquet from S3 itself, epoch by epoch.

One Iceberg table (``--rows`` rows of id, label, value and a ``--text-bytes`` string; the
default is about 1.1 GB in Arrow) is written to a local S3 server (moto's; see
kubetrain.testing.s3). Then ``--ranks`` processes read it for ``--epochs`` epochs, each rank
its own quarter, twice:

- **direct**: each rank reads its share of the table's Parquet data files from S3 with
  pyarrow every epoch (what a job without the cache does);
- **cache**: a cache of ``--workers`` workers and a head (kubetrain.datacache, processes on
  loopback) loads the table once; each rank streams its shard with `ShardReader` (upstream's
  protocol: GetFlightInfo on the head, DoGet on the workers) every epoch.

Per epoch it prints rows/s and MB/s (Arrow bytes) summed over the ranks, the epoch taking as
long as its slowest rank. The practical ceiling, printed too: one process serving the whole
table from memory over ``pyarrow.flight`` on loopback to one DoGet client.

    .venv/bin/python benchmarks/data_cache.py                 # ~1.1 GB, 4 ranks, 3 epochs
    .venv/bin/python benchmarks/data_cache.py --rows 2000000  # a quick look

moto serves S3 from one Python process, so "direct" measures moto as much as pyarrow; on a
small, shared machine every figure moves with the load, which the output does not hide.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kubetrain.testing.s3 import S3Server

__all__ = ["main"]

MB = 1e6


def _direct_rank(args: tuple[dict[str, str], list[str], int]) -> tuple[float, int, int]:
    props, paths, _rank = args
    import pyarrow.parquet as pq
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        access_key=props["s3.access-key-id"], secret_key=props["s3.secret-access-key"],
        endpoint_override=props["s3.endpoint"], region="us-east-1", scheme="http",
    )  # fmt: skip
    began, rows, nbytes = time.perf_counter(), 0, 0
    for path in paths:
        table = pq.read_table(path.removeprefix("s3://"), filesystem=s3)
        rows += table.num_rows
        nbytes += table.nbytes
    return time.perf_counter() - began, rows, nbytes


def _cache_rank(args: tuple[str, int, int]) -> tuple[float, int, int]:
    endpoint, rank, world = args
    from kubetrain.datacache import ShardReader

    began, rows, nbytes = time.perf_counter(), 0, 0
    for batch in ShardReader(endpoint, rank, world, prefetch=8):
        rows += batch.num_rows
        nbytes += batch.nbytes
    return time.perf_counter() - began, rows, nbytes


def _warm(_: int) -> None:
    # Imports happen once per pool process, before any epoch is timed.
    import pyarrow.flight
    import pyarrow.parquet

    import kubetrain.datacache  # noqa: F401

    del pyarrow.flight


def _report(label: str, epoch: int, results: list[tuple[float, int, int]]) -> float:
    wall = max(r[0] for r in results)
    rows = sum(r[1] for r in results)
    nbytes = sum(r[2] for r in results)
    print(
        f"  {label:<6} epoch {epoch}: {rows / wall:>12,.0f} rows/s  {nbytes / MB / wall:>8,.0f} MB/s"
        f"  ({rows:,} rows in {wall:.2f} s)",
        flush=True,
    )
    return nbytes / MB / wall


def _loopback_limit(table: Any) -> float:
    """MB/s of one DoGet of ``table`` from a flight server in this process, best of 2."""
    import pyarrow as pa
    import pyarrow.flight as flight

    # The batch size the cache's workers stream: one 1 GB message is no fair limit.
    batches = pa.Table.from_batches(table.to_batches(max_chunksize=64 * 1024), table.schema)

    class One(flight.FlightServerBase):  # type: ignore[misc]
        def do_get(self, context: Any, ticket: Any) -> Any:
            return flight.RecordBatchStream(batches)

    server = One("grpc://127.0.0.1:0")
    threading.Thread(target=server.serve, daemon=True).start()
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    best = 0.0
    for _ in range(2):
        began, nbytes = time.perf_counter(), 0
        for chunk in client.do_get(flight.Ticket(b"all")):
            nbytes += chunk.data.nbytes
        best = max(best, nbytes / MB / (time.perf_counter() - began))
    client.close()
    server.shutdown()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/data_cache.py")
    parser.add_argument("--rows", type=int, default=12_000_000)
    parser.add_argument("--text-bytes", type=int, default=64)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from kubetrain.datacache.table import CacheSource, file_rows, load_table
    from kubetrain.testing.datacache import CacheCluster
    from kubetrain.testing.iceberg import s3_properties, sample_table, write_table

    ctx = mp.get_context("spawn")
    with S3Server() as s3, tempfile.TemporaryDirectory() as tmp:
        props = s3_properties(s3.endpoint, s3.access_key_id, s3.secret_access_key)
        began = time.perf_counter()
        table = sample_table(args.rows, text_bytes=args.text_bytes)
        print(f"table: {table.num_rows:,} rows, {table.nbytes / MB:,.0f} MB in Arrow", flush=True)
        loc = write_table(
            table, bucket="bench", namespace="bench", name="rows", properties=props,
            files=args.files,
        )  # fmt: skip
        print(f"written to S3 as Iceberg in {time.perf_counter() - began:.1f} s", flush=True)
        limit = _loopback_limit(table)
        print(f"loopback limit (one process, one DoGet): {limit:,.0f} MB/s", flush=True)
        del table

        files = [p for p, _ in file_rows(load_table(CacheSource(loc, "bench", "rows", props)))]
        shares = [files[r :: args.ranks] for r in range(args.ranks)]
        direct: list[float] = []
        print("direct (each rank reads its Parquet files from S3):", flush=True)
        with ctx.Pool(args.ranks) as pool:
            pool.map(_warm, range(args.ranks))
            for epoch in range(1, args.epochs + 1):
                results = pool.map(_direct_rank, [(props, shares[r], r) for r in range(args.ranks)])
                direct.append(_report("direct", epoch, results))

        aws = {
            "AWS_ACCESS_KEY_ID": s3.access_key_id, "AWS_SECRET_ACCESS_KEY": s3.secret_access_key,
            "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3.endpoint,
        }  # fmt: skip
        began = time.perf_counter()
        with CacheCluster(
            metadata_loc=loc, schema="bench", table="rows", s3=aws, workers=args.workers,
            log_dir=Path(tmp) / "cache",
        ) as cache:  # fmt: skip
            print(
                f"cache ({args.workers} workers) loaded in {time.perf_counter() - began:.1f} s",
                flush=True,
            )
            cached: list[float] = []
            with ctx.Pool(args.ranks) as pool:
                pool.map(_warm, range(args.ranks))
                for epoch in range(1, args.epochs + 1):
                    results = pool.map(
                        _cache_rank, [(cache.endpoint, r, args.ranks) for r in range(args.ranks)]
                    )
                    cached.append(_report("cache", epoch, results))

    later = range(1, len(cached))
    if later:
        ratio = min(cached[e] / direct[e] for e in later)
        print(f"epochs 2-{args.epochs}: cache / direct >= {ratio:.1f}x (goal 3x)")
    share = max(cached) / limit
    print(f"cache aggregate / loopback limit: {share:.0%} at best (goal 50%)")


if __name__ == "__main__":
    main()
