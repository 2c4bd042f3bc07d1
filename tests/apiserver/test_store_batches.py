"""The store's writer commits each loop turn's changes as one batch, in a few multi-row
statements: every row lands, the last write of a name wins, deletes keep their place, and a
reopened store continues after the newest resourceVersion, deleted or not."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.apiserver.store import Change, Store


def _cm(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


def _put(store: Store, kind: str, name: str, value: str = "") -> asyncio.Future[None]:
    rv = store.next_rv()
    obj = _cm(name, value)
    obj["metadata"]["resourceVersion"] = str(rv)
    return store.put(Change(rv, kind, "configmaps", "default", name, obj, None))


# (writes in one loop turn: "name=value" upserts, "-name" deletes; what the database holds)
CASES = [
    pytest.param(["a=1"], {"a": "1"}, id="one write is one statement"),
    pytest.param(["a=1", "b=2", "c=3"], {"a": "1", "b": "2", "c": "3"}, id="three writes (2 + 1 rows)"),
    pytest.param([f"n{i}=x" for i in range(1000)], {f"n{i}": "x" for i in range(1000)},
                 id="a thousand writes span every statement size in one transaction"),
    pytest.param(["a=1", "a=2", "a=3"], {"a": "3"}, id="the last write of a name wins"),
    pytest.param(["a=1", "b=1", "-a", "a=2", "-b"], {"a": "2"},
                 id="deletes and writes of one name keep their order"),
    pytest.param(["a=1", "-a"], {}, id="a delete after the write leaves nothing"),
]  # fmt: skip


@pytest.mark.parametrize(("writes", "stored"), CASES)
async def test_one_turns_writes_land_in_order_and_the_reopened_store_goes_on_after_them(
    tmp_path: Path, writes: list[str], stored: dict[str, str]
) -> None:
    path = tmp_path / "apiserver.db"
    store = Store(path)
    await store.open()
    futures = []
    for w in writes:
        if w.startswith("-"):
            futures.append(_put(store, "DELETED", w[1:]))
        else:
            name, value = w.split("=")
            futures.append(_put(store, "ADDED", name, value))
    await asyncio.gather(*futures)
    last_rv = store.rv
    await store.close()

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, data FROM objects").fetchall()
    finally:
        conn.close()
    assert {name: json.loads(data)["data"]["v"] for name, data in rows} == stored

    reopened = Store(path)
    await reopened.open()
    try:
        # A deleted object's resourceVersion is never handed out again either.
        assert reopened.rv == last_rv
        assert reopened.next_rv() == last_rv + 1
        assert {k[1] for k in reopened.keys("configmaps")} == set(stored)
    finally:
        await reopened.close()
