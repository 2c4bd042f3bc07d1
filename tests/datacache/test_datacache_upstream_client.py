"""Upstream's client steps (its notebook's DataCacheDataset, §7.2), replayed with plain
``pyarrow.flight`` and no kubetrain client code, against kubetrain's head and workers."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
flight = pytest.importorskip("pyarrow.flight")


def upstream_read(endpoint: str, rank: int, world: int) -> tuple[Any, list[Any]]:
    """What the notebook does for one shard: the FlightInfo and every batch it streams."""
    client = flight.connect(endpoint)
    info = client.get_flight_info(flight.FlightDescriptor.for_path(str(rank), str(world)))
    batches = []
    for endpoint_ in info.endpoints:
        for location in endpoint_.locations:
            reader = flight.FlightClient(location.uri).do_get(endpoint_.ticket)
            batches.extend(chunk.data for chunk in reader)
    return info, batches


def u16_pair(start: int, end: int) -> bytes:
    # bincode 2, standard config: 251 marks a little-endian u16 (both numbers are 251..65535 or
    # small here).
    def one(v: int) -> bytes:
        return bytes([v]) if v < 251 else bytes([251]) + v.to_bytes(2, "little")

    return one(start) + one(end)


@pytest.mark.parametrize("world", [1, 2, 3], ids=lambda w: f"{w} rank(s)")
def test_the_ranks_together_get_every_row_once(cache: Any, iceberg_table: Any, world: int) -> None:
    seen: list[int] = []
    for rank in range(world):
        _, batches = upstream_read(cache.endpoint, rank, world)
        ids = [i for b in batches for i in b.column("id").to_pylist()]
        per_rank = -(-iceberg_table.rows.num_rows // world)
        assert len(ids) == min(per_rank, iceberg_table.rows.num_rows - rank * per_rank)
        seen.extend(ids)
    assert sorted(seen) == list(range(iceberg_table.rows.num_rows))


def test_rows_arrive_whole_and_without_the_cache_index(cache: Any, iceberg_table: Any) -> None:
    _, batches = upstream_read(cache.endpoint, 0, 1)
    got = pa.Table.from_batches(batches).sort_by("id")
    assert got.schema.names == ["id", "label", "value", "text"]
    assert got.equals(iceberg_table.rows.select(got.schema.names))


def test_tickets_hold_the_ranks_range_and_endpoints_name_the_workers(cache: Any) -> None:
    info, _ = upstream_read(cache.endpoint, 1, 2)
    assert {e.ticket.ticket for e in info.endpoints} == {u16_pair(2500, 4999)}
    assert all(e.app_metadata == e.ticket.ticket for e in info.endpoints)
    workers = {w.location for w in cache.workers}
    assert {loc.uri.decode() for e in info.endpoints for loc in e.locations} <= workers


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        pytest.param([], "ArrowInvalid", "Missing local_rank", id="no rank in the path"),
        pytest.param(["0"], "ArrowInvalid", "Missing total", id="no world size in the path"),
        pytest.param(["0", "x"], "ArrowInvalid", "Invalid total", id="a world size not a number"),
        pytest.param(["a", "2"], "ArrowInvalid", "Invalid local_rank", id="a rank not a number"),
        # Upstream answers OUT_OF_RANGE, a gRPC code Arrow Flight's Python API cannot send.
        pytest.param(
            ["9", "2"], "FlightServerError", "Invalid partition range", id="rank >= world"
        ),
    ],
)
def test_bad_descriptors_are_refused_with_upstreams_reasons(
    cache: Any, path: list[str], error: str, message: str
) -> None:
    client = flight.connect(cache.endpoint)
    with pytest.raises(getattr(pa, error, None) or getattr(flight, error), match=message):
        client.get_flight_info(flight.FlightDescriptor.for_path(*path))


def test_a_worker_refuses_a_malformed_ticket(cache: Any) -> None:
    client = flight.connect(cache.workers[0].location)
    with pytest.raises(pa.ArrowInvalid, match="Invalid ticket format"):
        client.do_get(flight.Ticket(bytes([254]))).read_all()


def test_every_process_answers_ready_on_its_health_port(cache: Any) -> None:
    for p in [cache.head, *cache.workers]:
        with urllib.request.urlopen(f"http://127.0.0.1:{p.health_port}/ready", timeout=10) as r:
            assert (r.status, r.read()) == (200, b"ready")


def test_a_head_without_its_table_exits_with_one_clear_line(iceberg_table: Any) -> None:
    missing = iceberg_table.metadata_loc.rsplit("/", 1)[0] + "/99999-missing.metadata.json"
    env = {
        **os.environ,
        **iceberg_table.aws_env(),
        "METADATA_LOC": missing,
        "SCHEMA_NAME": "reviews",
        "TABLE_NAME": "train",
        "CACHE_WORKERS": "127.0.0.1:1",
        "HEALTH_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.datacache", "head", "127.0.0.1", "0"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "table reviews.train: cannot read " + missing in errors[0]
    assert "Traceback" not in done.stdout + done.stderr
