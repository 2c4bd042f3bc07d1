"""The store commits on the event loop and leaves copying the WAL into the database (the
checkpoint, which waits on the disk) to a thread of its own, after every MiB written; the
commits that come meanwhile wait for it, so the WAL starts over instead of growing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubetrain.local.apiserver.store import Change, Store

MIB = 1024 * 1024


def config_map(name: str, size: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"blob": "x" * size}}


async def write(store: Store, name: str, size: int) -> None:
    obj = config_map(name, size)
    await store.put(Change(store.next_rv(), "ADDED", "/configmaps", "ns", name, obj, None))


async def test_the_wal_is_copied_into_the_database_and_started_over_and_a_reopen_sees_it_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    await store.open()
    try:
        for i in range(60):  # 6,000 KiB of objects, one commit each
            await write(store, f"cm-{i}", 100 * 1024)
        # Each write after a checkpoint was asked for committed once it had run: the
        # database file holds the first five MiB, and the WAL was reused from its start.
        assert path.stat().st_size > 5 * MIB
        assert path.with_name("store.db-wal").stat().st_size < 2 * MIB
    finally:
        await store.close()
    reopened = Store(path)
    await reopened.open()
    try:
        assert len(reopened.items("/configmaps", "ns")) == 60
        assert reopened.rv == 60
    finally:
        await reopened.close()
