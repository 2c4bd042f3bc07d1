"""The training side: `CacheDataset` shards by rank and DataLoader worker, re-cuts batches,
and `ShardReader` resumes after a cache restart with the same rows."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")

from kubetrain.datacache import ShardReader  # noqa: E402
from kubetrain.datacache.dataset import CacheDataset  # noqa: E402
from kubetrain.datacache.reader import CacheReadError, _Progress  # noqa: E402


def ids_of(batches: Any) -> list[int]:
    return [i for b in batches for i in b.column("id").to_pylist()]


@pytest.mark.parametrize(
    ("world", "loader_workers"),
    [
        pytest.param(2, 0, id="two ranks read disjoint halves"),
        pytest.param(2, 2, id="two ranks with two loader workers each read four quarters"),
    ],
)
def test_ranks_read_disjoint_shards_whose_union_is_the_table(
    cache: Any, iceberg_table: Any, monkeypatch: pytest.MonkeyPatch, world: int, loader_workers: int
) -> None:
    seen: list[int] = []
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        dataset = CacheDataset(cache.endpoint, batch_size=700)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=loader_workers)
        batches = list(loader)
        assert all(b.num_rows == 700 for b in batches[:-1]) or loader_workers
        seen.extend(ids_of(batches))
    assert sorted(seen) == list(range(iceberg_table.rows.num_rows))


def test_batches_are_cut_to_the_batch_size_with_one_short_tail(cache: Any) -> None:
    batches = list(CacheDataset(cache.endpoint, batch_size=999).batches())
    assert [b.num_rows for b in batches] == [999] * 5 + [5]


def test_a_resumed_read_starts_after_the_rows_already_given(cache: Any) -> None:
    reader = ShardReader(cache.endpoint, 0, 1)
    full = ids_of(reader._stream(_Progress()))
    resumed = ids_of(reader._stream(_Progress(rows=1234)))
    assert resumed == full[1234:]


def test_a_resumed_read_refuses_a_cache_that_now_serves_other_columns(cache: Any) -> None:
    reader = ShardReader(cache.endpoint, 0, 1)
    before = _Progress(rows=10, schema=pa.schema([("other", pa.int8())]))
    with pytest.raises(CacheReadError, match="changed its columns between attempts"):
        next(iter(reader._stream(before)))


def test_a_read_waits_for_a_restarting_cache_and_gets_the_same_rows(cache: Any) -> None:
    before = ids_of(ShardReader(cache.endpoint, 1, 2))
    cache.stop()
    # The LWS restarts the whole group: the reader must ride it out, not fail or skip rows.
    restart = threading.Timer(1.0, cache.start)
    restart.start()
    try:
        after = ids_of(ShardReader(cache.endpoint, 1, 2, retry_timeout_s=120))
    finally:
        restart.join()
    assert after == before


def test_a_worker_restarted_alone_gets_its_rows_from_the_head_again(cache: Any) -> None:
    before = ids_of(ShardReader(cache.endpoint, 0, 1))
    # Restart policy None: the worker comes back alone and empty; the head, still up, loads
    # it again, and the reader rides it out.
    cache.workers[0].stop()
    cache.start_worker(0)
    after = ids_of(ShardReader(cache.endpoint, 0, 1, retry_timeout_s=60))
    assert after == before
    assert "had lost its rows: loaded it again" in cache.head.log.read_text()


def test_a_cache_that_never_comes_back_fails_the_read_clearly() -> None:
    reader = ShardReader("grpc://127.0.0.1:9", 0, 1, retry_timeout_s=1)
    with pytest.raises(Exception, match=r"shard 0/1: no progress for 1 s after 0 row\(s\)"):
        list(reader)
