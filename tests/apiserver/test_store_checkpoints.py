"""The store commits on the event loop and leaves copying the WAL into the database (the
checkpoint, which waits on the disk) to a thread of its own, asked after every few MiB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubetrain.local.apiserver.store import Change, Store
from polling import until

MIB = 1024 * 1024


def config_map(name: str, size: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"blob": "x" * size}}


async def write(store: Store, name: str, size: int) -> None:
    change = Change(
        store.next_rv(), "ADDED", "/configmaps", "ns", name, config_map(name, size), None
    )
    await store.put(change)


async def test_the_wal_reaches_the_database_file_after_a_few_mib_and_a_reopen_sees_it_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    await store.open()
    try:
        for i in range(60):  # 6 MiB of objects, one commit each
            await write(store, f"cm-{i}", 100 * 1024)

        # Commits alone only append to the WAL: the database file grows by a checkpoint.
        async def checkpointed() -> bool:
            return path.stat().st_size > 4 * MIB

        await until(checkpointed, 30, "a checkpoint of the WAL into the database")
    finally:
        await store.close()
    reopened = Store(path)
    await reopened.open()
    try:
        assert len(reopened.items("/configmaps", "ns")) == 60
        assert reopened.rv == 60
    finally:
        await reopened.close()
