"""Storage: every object in memory, written through to SQLite by one writer thread.

Reads are served from memory, so they never touch SQLite. Writes update memory at once (the
event loop is the only writer, so each request sees the ones before it), then go to the writer
thread, which commits whatever has queued up in one transaction (group commit) and hands the
batch back to the loop; only then are the callers answered and watchers told. An answered write
is therefore committed: SQLite in WAL mode with ``synchronous=NORMAL`` survives kill -9 of the
process (not a power cut). resourceVersions come from one counter stored with every commit, so
they keep increasing across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.api import codec

__all__ = ["Change", "Store"]

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (resource, namespace, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change, as watchers see it. ``old`` is the previous state (None on ADDED)."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


class _Pending:
    __slots__ = ("change", "data", "future")

    def __init__(self, change: Change, data: str, future: asyncio.Future[None]) -> None:
        self.change = change
        self.data = data  # the object's JSON ("" for a deletion)
        self.future = future


# How many recently written objects keep their JSON for answers and watch events.
_ENCODED_KEPT = 2048


class Store:
    """Objects by resource key and (namespace, name). Stored dicts are never changed in place."""

    def __init__(self, path: Path | None, history: int = 10_000) -> None:
        self._path = path
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {}
        self._by_uid: dict[str, tuple[str, str, str]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        self.rv = 0
        # Watch history: the changes after ``history_start``; older resourceVersions get 410.
        self.history: deque[Change] = deque(maxlen=history)
        self.history_start = 0
        self._listeners: list[Callable[[Change], None]] = []
        self._writes: dict[str, int] = {}
        self._writer: _Writer | None = None
        # Changes of this loop iteration, handed to the writer in one go: waking the writer
        # thread once per change costs more (GIL hand-offs) than the change itself.
        self._outbox: list[_Pending] = []
        # JSON of recently written objects by id (the object is kept, so the id stays its):
        # one encoding serves the database, the write's answer and every watcher.
        self._encoded: dict[int, tuple[dict[str, Any], bytes]] = {}
        # ids of the objects read from the database at open and not written since.
        self._loaded: set[int] = set()

    # -- life cycle ------------------------------------------------------------------------
    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        rows, rv = await loop.run_in_executor(None, _load, self._path)
        for resource, namespace, name, data in rows:
            obj = codec.loads(data)
            self._index(resource, namespace, name, obj)
            self._loaded.add(id(obj))
        self.rv = rv
        self.history_start = rv
        self._writer = _Writer(self._path, loop, self._committed)
        self._writer.start()

    async def close(self) -> None:
        self._flush()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await asyncio.get_running_loop().run_in_executor(None, writer.stop)

    # -- reads -----------------------------------------------------------------------------
    def encoded(self, obj: dict[str, Any]) -> bytes:
        """``obj`` as compact JSON; written objects are encoded once (they never change)."""
        kept = self._encoded.get(id(obj))
        if kept is not None and kept[0] is obj:
            return kept[1]
        return codec.dumps(obj)

    def from_disk(self, obj: dict[str, Any]) -> bool:
        """Whether stored ``obj`` was read from the database or revised by a schema change
        (not written by this process under the schema it has now)."""
        return id(obj) in self._loaded

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(resource, {}).get((namespace, name))

    def items(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects sorted by namespace then name (the order list and continue rely on)."""
        table = self._objects.get(resource, {})
        keys = sorted(table) if namespace is None else sorted(k for k in table if k[0] == namespace)
        return [table[k] for k in keys]

    def writes(self, resource: str) -> int:
        """How many times objects of ``resource`` were written or removed in memory: what is
        derived from them is still true while this number is the same."""
        return self._writes.get(resource, 0)

    def keys(self, resource: str) -> Iterable[Key]:
        return self._objects.get(resource, {}).keys()

    def count(self, resource: str, namespace: str) -> int:
        return sum(1 for k in self._objects.get(resource, {}) if k[0] == namespace)

    def resources(self) -> list[str]:
        return list(self._objects)

    def locate_uid(self, uid: str) -> tuple[str, str, str] | None:
        return self._by_uid.get(uid)

    def dependents(self, uid: str) -> list[tuple[str, str, str]]:
        """(resource, namespace, name) of every object with an ownerReference to ``uid``."""
        return sorted(self._dependents.get(uid, ()))

    def revise_loaded(
        self, resource: str, revise: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> int:
        """Replace in memory each object of ``resource`` that ``revise`` returns a new version
        of, keeping its resourceVersion and sending no watch event: what reading from storage
        adds (a CRD's defaults), as etcd keeps what was written. How many were replaced."""
        table = self._objects.get(resource, {})
        revised = 0
        for (namespace, name), obj in list(table.items()):
            new = revise(obj)
            if new is not None:
                self._index(resource, namespace, name, new)
                # Only defaulted, not pruned or validated under the current schema: its next
                # write walks it whole, like an object read from the database.
                self._loaded.add(id(new))
                revised += 1
        return revised

    # -- writes ----------------------------------------------------------------------------
    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, change: Change) -> asyncio.Future[None]:
        """Apply ``change`` in memory now; the future resolves once it is committed."""
        if change.type == "DELETED":
            self._unindex(change.resource, change.namespace, change.name)
        else:
            self._index(change.resource, change.namespace, change.name, change.obj)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        if self._writer is None:
            raise RuntimeError("store is closed")
        if not self._outbox:
            loop.call_soon(self._flush)
        data = b""
        if change.type != "DELETED":
            data = codec.dumps(change.obj)
            if len(self._encoded) >= _ENCODED_KEPT:
                del self._encoded[next(iter(self._encoded))]
            self._encoded[id(change.obj)] = (change.obj, data)
        self._outbox.append(_Pending(change, data.decode(), future))
        return future

    def _flush(self) -> None:
        batch, self._outbox = self._outbox, []
        if batch and self._writer is not None:
            self._writer.submit(batch)

    def subscribe(self, listener: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``listener`` with every committed change, in resourceVersion order."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _committed(self, batch: list[_Pending], error: BaseException | None) -> None:
        for pending in batch:
            if error is None:
                if len(self.history) == self.history.maxlen:
                    self.history_start = self.history[0].rv
                self.history.append(pending.change)
                for listener in list(self._listeners):
                    listener(pending.change)
                if not pending.future.done():
                    pending.future.set_result(None)
            elif not pending.future.done():
                pending.future.set_exception(error)

    # -- indexes ---------------------------------------------------------------------------
    def _index(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> None:
        self._writes[resource] = self._writes.get(resource, 0) + 1
        table = self._objects.setdefault(resource, {})
        previous = table.get((namespace, name))
        if previous is not None:
            self._drop_refs(resource, namespace, name, previous)
            self._loaded.discard(id(previous))
        table[(namespace, name)] = obj
        meta = obj.get("metadata") or {}
        ident = (resource, namespace, name)
        if meta.get("uid"):
            self._by_uid[meta["uid"]] = ident
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("uid"):
                self._dependents.setdefault(ref["uid"], set()).add(ident)

    def _unindex(self, resource: str, namespace: str, name: str) -> None:
        self._writes[resource] = self._writes.get(resource, 0) + 1
        previous = self._objects.get(resource, {}).pop((namespace, name), None)
        if previous is not None:
            self._drop_refs(resource, namespace, name, previous)
            self._loaded.discard(id(previous))

    def _drop_refs(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ident = (resource, namespace, name)
        if meta.get("uid") and self._by_uid.get(meta["uid"]) == ident:
            del self._by_uid[meta["uid"]]
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("uid"):
                deps = self._dependents.get(ref["uid"])
                if deps is not None:
                    deps.discard(ident)
                    if not deps:
                        del self._dependents[ref["uid"]]


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as err:
            # Say which file, so a person can move a damaged database away.
            raise sqlite3.DatabaseError(f"{path}: {err}") from err
        return conn
    conn.executescript(_SCHEMA)
    return conn


def _load(path: Path | None) -> tuple[list[tuple[str, str, str, str]], int]:
    if path is None or not path.exists():
        return [], 0
    conn = _connect(path)
    try:
        rows = conn.execute("SELECT resource, namespace, name, data FROM objects").fetchall()
        row = conn.execute("SELECT value FROM meta WHERE key = 'rv'").fetchone()
        rv = int(row[0]) if row else 0
        top = conn.execute("SELECT MAX(rv) FROM objects").fetchone()
        return rows, max(rv, int(top[0] or 0))
    finally:
        conn.close()


class _Writer(threading.Thread):
    """The only thread that writes SQLite; commits everything queued in one transaction."""

    def __init__(
        self,
        path: Path | None,
        loop: asyncio.AbstractEventLoop,
        done: Callable[[list[_Pending], BaseException | None], None],
    ) -> None:
        super().__init__(name="kubetrain-apiserver-sqlite", daemon=True)
        self._path = path
        self._loop = loop
        self._done = done
        self._queue: queue.SimpleQueue[list[_Pending] | None] = queue.SimpleQueue()

    def submit(self, batch: list[_Pending]) -> None:
        self._queue.put(batch)

    def stop(self) -> None:
        self._queue.put(None)
        self.join()

    def run(self) -> None:
        conn = _connect(self._path)
        stopping = False
        try:
            while not stopping:
                first = self._queue.get()
                if first is None:
                    break
                batch = list(first)
                while len(batch) < 1000:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stopping = True
                        break
                    batch += nxt
                error = self._commit(conn, batch)
                if not self._loop.is_closed():
                    self._loop.call_soon_threadsafe(self._done, batch, error)
        finally:
            conn.close()

    @staticmethod
    def _commit(conn: sqlite3.Connection, batch: list[_Pending]) -> BaseException | None:
        try:
            if all(p.change.type != "DELETED" for p in batch):
                _upsert(conn, [(p.change.resource, p.change.namespace, p.change.name,
                                p.change.rv, p.data) for p in batch])  # fmt: skip
                return None
            conn.execute("BEGIN")
            # Deletes and upserts of one name in one batch must keep their order.
            for pending in batch:
                c = pending.change
                if c.type == "DELETED":
                    conn.execute(
                        "DELETE FROM objects WHERE resource=? AND namespace=? AND name=?",
                        (c.resource, c.namespace, c.name),
                    )
                else:
                    conn.execute(
                        _upsert_sql(1), (c.resource, c.namespace, c.name, c.rv, pending.data)
                    )
            # A delete leaves no row with its resourceVersion: remember it (`_load` takes the
            # greater of this and the newest row's).
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('rv', ?)",
                (str(max(p.change.rv for p in batch)),),
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return exc
        return None


# Rows per INSERT statement, largest first: a few statement shapes, each compiled once (sqlite3
# caches statements by their text), all under SQLite's old limit of 999 parameters.
_ROWS_PER_STATEMENT = (128, 32, 8, 2, 1)


@functools.cache
def _upsert_sql(rows: int) -> str:
    return "INSERT OR REPLACE INTO objects VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * rows)


def _upsert(conn: sqlite3.Connection, rows: list[tuple[str, str, str, int, str]]) -> None:
    """Write ``rows`` (in order: a later row of one name replaces an earlier one) in one
    transaction, in as few statements as the sizes allow. Why not ``executemany``: sqlite3
    releases the GIL around every statement it steps, once per row, and each time this thread
    takes it back from the event loop's thread, which then waits for it. One statement needs
    no BEGIN/COMMIT, and the newest row records the resourceVersion (see `_load`)."""
    statements: list[tuple[str, list[Any]]] = []
    start = 0
    for size in _ROWS_PER_STATEMENT:
        while len(rows) - start >= size:
            chunk = rows[start : start + size]
            statements.append((_upsert_sql(size), [v for row in chunk for v in row]))
            start += size
    if len(statements) == 1:
        conn.execute(*statements[0])
        return
    conn.execute("BEGIN")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.execute("COMMIT")
