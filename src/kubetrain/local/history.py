"""The metrics history of the local engine: every accepted progress report, kept in SQLite.

A TrainJob's status holds only the latest report; the history keeps the series so that
``kubetrain metrics`` can print and plot it. The status server calls `MetricsHistory.record`
for every report it accepted (its ``on_accepted`` hook); the CLI opens the same file read-only.

Size stays bounded without losing the shape of a curve: when a TrainJob passes
``max_points``, every second point of its older half is dropped (the first point always stays),
so early training is kept at a coarser grain rather than cut off. Past ``max_jobs`` TrainJobs the
one reported least recently is forgotten. Series are keyed by the TrainJob's uid, so a job
recreated under the same name starts a new series.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kubetrain.api.access import dicts

__all__ = ["HISTORY_FILE", "Columns", "MetricsHistory", "Point", "as_number", "columns_of"]

HISTORY_FILE = "metrics.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    received REAL NOT NULL,
    updated TEXT NOT NULL,
    progress INTEGER,
    eta INTEGER,
    metrics TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_job ON reports (namespace, name, uid, id);
CREATE INDEX IF NOT EXISTS reports_uid ON reports (uid, id);
"""


def as_number(text: str) -> float | None:
    """A metric value as a number when it reads as one (values travel as strings)."""
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Point:
    """One accepted report."""

    received: float
    """Unix time the status server accepted it."""
    updated: str
    """``lastUpdatedTime`` as the training code sent it."""
    progress: int | None = None
    eta: int | None = None
    metrics: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "lastUpdatedTime": self.updated,
            "progressPercentage": self.progress,
            "estimatedRemainingSeconds": self.eta,
            "metrics": dict(self.metrics),
        }


# Metric maps are written by json.dumps of str -> str; msgspec reads them back several times faster.
_decode_metrics = msgspec.json.Decoder(dict[str, str]).decode


@dataclass
class Columns:
    """A series as columns, the shape charts take: receive times, progress, and each metric that
    reads as a number (None where a point lacks it or it is not a number: values travel as
    strings), in order of first appearance."""

    x: list[float] = field(default_factory=list)
    progress: list[int | None] = field(default_factory=list)
    metrics: dict[str, list[float | None]] = field(default_factory=dict)


def columns_of(points: Iterable[Point]) -> Columns:
    """The columns of ``points`` (which may be a stream), in one pass."""
    out = Columns()
    for i, p in enumerate(points):
        out.x.append(p.received)
        out.progress.append(p.progress)
        for name, raw in p.metrics.items():
            column = out.metrics.get(name)
            if column is None:
                column = out.metrics[name] = [None] * i
            column.append(as_number(raw))
        for column in out.metrics.values():
            if len(column) == i:  # a metric this point did not report
                column.append(None)
    out.metrics = {n: c for n, c in out.metrics.items() if any(v is not None for v in c)}
    return out


# Every metric map of a series as one JSON array, decoded with each value read as a float.
_decode_numeric_maps = msgspec.json.Decoder(list[dict[str, float]], strict=False).decode


def _int_or_none(value: Any) -> int | None:
    # SQLite holds 64-bit integers: anything else is not a value worth a row's column.
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


class MetricsHistory:
    """The series of progress reports per TrainJob, in one SQLite file (thread-safe)."""

    def __init__(
        self,
        path: Path,
        *,
        max_points: int = 5000,
        max_jobs: int = 500,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.max_points = max(4, max_points)
        self.max_jobs = max(1, max_jobs)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        if read_only:
            # A reader must not create the file nor take write locks from the daemon.
            self._db = sqlite3.connect(
                f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=5
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, timeout=5)
            self._db.execute("PRAGMA journal_mode=WAL")
            # Losing the last few points on a power cut is acceptable; an fsync per report is not.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    @classmethod
    def open_for_reading(cls, home: Path) -> MetricsHistory | None:
        """The history of ``home`` for reading, or None when nothing was ever recorded there."""
        path = home / HISTORY_FILE
        if not path.exists():
            return None
        return cls(path, read_only=True)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def record(
        self,
        namespace: str,
        name: str,
        uid: str,
        trainer_status: Mapping[str, Any],
        *,
        received: float | None = None,
    ) -> None:
        """Append one accepted ``trainerStatus``."""
        metrics = {
            str(m.get("name")): str(m.get("value")) for m in dicts(trainer_status.get("metrics"))
        }
        row = (
            namespace,
            name,
            uid,
            time.time() if received is None else received,
            str(trainer_status.get("lastUpdatedTime") or ""),
            _int_or_none(trainer_status.get("progressPercentage")),
            _int_or_none(trainer_status.get("estimatedRemainingSeconds")),
            json.dumps(metrics, separators=(",", ":")),
        )
        with self._lock, self._db:
            if uid not in self._counts:
                self._counts[uid] = self._count(uid)
                if self._counts[uid] == 0:
                    self._forget_oldest_jobs()
            self._db.execute(
                "INSERT INTO reports (namespace, name, uid, received, updated, progress, eta, metrics)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            self._counts[uid] += 1
            if self._counts[uid] > self.max_points:
                self._thin(uid)

    def _count(self, uid: str) -> int:
        (n,) = self._db.execute("SELECT COUNT(*) FROM reports WHERE uid = ?", (uid,)).fetchone()
        return int(n)

    def _thin(self, uid: str) -> None:
        # Every second row of the older half, the very first row excepted.
        self._db.execute(
            "DELETE FROM reports WHERE id IN ("
            " SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn"
            "  FROM reports WHERE uid = ? ORDER BY id LIMIT ?) WHERE rn % 2 = 0)",
            (uid, self.max_points // 2),
        )
        self._counts[uid] = self._count(uid)

    def _forget_oldest_jobs(self) -> None:
        jobs = self._db.execute(
            "SELECT uid FROM reports GROUP BY uid ORDER BY MAX(id) DESC"
        ).fetchall()
        for (uid,) in jobs[self.max_jobs - 1 :]:
            self._db.execute("DELETE FROM reports WHERE uid = ?", (uid,))
            self._counts.pop(uid, None)

    def series(
        self, namespace: str, name: str, uid: str | None = None, *, after: float | None = None
    ) -> list[Point]:
        """The reports of one TrainJob, oldest first (only those received after ``after``).

        Without ``uid``: the TrainJob of that name that reported last (a deleted job's series
        stays readable until it is forgotten).
        """
        return list(self.iter_series(namespace, name, uid, after=after))

    def _uid(self, namespace: str, name: str, uid: str | None) -> str | None:
        if uid is not None:
            return uid
        found = self._db.execute(
            "SELECT uid FROM reports WHERE namespace = ? AND name = ? ORDER BY id DESC LIMIT 1",
            (namespace, name),
        ).fetchone()
        return None if found is None else str(found[0])

    def columns(
        self, namespace: str, name: str, uid: str | None = None, *, after: float | None = None
    ) -> Columns:
        """``columns_of(self.iter_series(...))``, built in C when every value is a plain number
        (the usual case): SQLite joins the rows into JSON, msgspec reads them as floats. A
        100,000-point series takes a fraction of a second instead of seconds."""
        with self._lock:
            uid = self._uid(namespace, name, uid)
            if uid is None:
                return Columns()
            maps, received, progress = self._db.execute(
                # The ordered subquery fixes the aggregates' order (SQLite < 3.44 has no
                # ORDER BY inside an aggregate; it aggregates in its input's order).
                "SELECT '[' || group_concat(metrics) || ']', json_group_array(received),"
                " json_group_array(progress) FROM (SELECT metrics, received, progress"
                " FROM reports WHERE namespace = ? AND name = ? AND uid = ? AND received > ?"
                " ORDER BY id)",
                (namespace, name, uid, float("-inf") if after is None else after),
            ).fetchone()
        if maps is None:
            return Columns()
        try:
            decoded = _decode_numeric_maps(maps)
        except msgspec.ValidationError:  # some value is not a plain number: the general path
            return columns_of(self.iter_series(namespace, name, uid, after=after))
        names: dict[str, None] = {}
        for m in decoded:
            names.update(dict.fromkeys(m))
        return Columns(
            x=msgspec.json.decode(received, type=list[float]),
            progress=msgspec.json.decode(progress, type=list[int | None]),
            metrics={n: [m.get(n) for m in decoded] for n in names},
        )

    def iter_series(
        self, namespace: str, name: str, uid: str | None = None, *, after: float | None = None
    ) -> Iterator[Point]:
        """:meth:`series` one point at a time, so a 100,000-point series never sits in memory
        whole (this history stays locked until the iteration ends)."""
        with self._lock:
            uid = self._uid(namespace, name, uid)
            if uid is None:
                return
            cursor = self._db.execute(
                "SELECT received, updated, progress, eta, metrics FROM reports"
                " WHERE namespace = ? AND name = ? AND uid = ? AND received > ? ORDER BY id",
                (namespace, name, uid, float("-inf") if after is None else after),
            )
            while rows := cursor.fetchmany(2000):
                for r in rows:
                    yield Point(float(r[0]), str(r[1]), r[2], r[3], _decode_metrics(r[4]))
