"""The series of progress reports a TrainJob sent, wherever it is kept.

The local engine keeps every accepted report (``kubetrain.local.history``); a cluster keeps only
the latest one, in ``status.trainerStatus``. ``kubetrain metrics`` and the dashboard both read
through :func:`metric_series`, so they always show the same points.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.client import resources as R
from kubetrain.client.errors import ClientError

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.local.history import Point

__all__ = [
    "MetricColumns",
    "MetricSeries",
    "latest_only",
    "metric_columns",
    "metric_names",
    "metric_points",
    "metric_series",
]


@dataclass
class MetricSeries:
    """The points of one TrainJob, and whether only the latest report was available."""

    namespace: str
    name: str
    uid: str | None
    job: dict[str, Any] | None
    local: bool
    points: list[Point] = field(default_factory=list)
    latest_only: bool = False
    """Only ``status.trainerStatus`` was there (always so on a cluster)."""

    @property
    def job_updated(self) -> str:
        """``lastUpdatedTime`` of the job's latest report ('' when none)."""
        status = (self.job or {}).get("status") or {}
        return str((status.get("trainerStatus") or {}).get("lastUpdatedTime") or "")


def metric_names(points: Sequence[Point], only: Sequence[str] | None = None) -> list[str]:
    """Metric names in order of first appearance (restricted to ``only`` when given)."""
    names: dict[str, None] = {}
    for p in points:
        names.update(dict.fromkeys(p.metrics))
    return [n for n in names if not only or n in only]


@dataclass
class MetricColumns:
    """A series as columns, the shape charts take: receive times, progress, and each numeric
    metric (None where a point lacks it or it is not a number: values travel as strings)."""

    x: list[float] = field(default_factory=list)
    progress: list[int | None] = field(default_factory=list)
    metrics: dict[str, list[float | None]] = field(default_factory=dict)


def metric_columns(points: Iterable[Point]) -> MetricColumns:
    """One pass over ``points`` (which may be a stream); metrics in order of first appearance."""
    from kubetrain.local.history import as_number

    out = MetricColumns()
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


def latest_only(job: dict[str, Any]) -> list[Point]:
    """The one point a cluster keeps: ``status.trainerStatus``."""
    from kubetrain.local.history import Point

    ts = (job.get("status") or {}).get("trainerStatus") or {}
    if not ts:
        return []
    return [
        Point(
            received=0.0,
            updated=str(ts.get("lastUpdatedTime") or ""),
            progress=ts.get("progressPercentage"),
            eta=ts.get("estimatedRemainingSeconds"),
            metrics={str(m.get("name")): str(m.get("value")) for m in ts.get("metrics") or []},
        )
    ]


def metric_series(
    jc: JobClient, name: str, namespace: str | None = None, *, after: float | None = None
) -> MetricSeries:
    """Every report of the TrainJob ``name`` (a deleted local job's series stays readable);
    with ``after``, only the reports received later (a page extending its curves).

    :class:`ClientError` when there is neither such a job nor a series under its name.
    """
    with metric_points(jc, name, namespace, after=after) as (series, points):
        series.points = list(points)
    return series


@contextlib.contextmanager
def metric_points(
    jc: JobClient, name: str, namespace: str | None = None, *, after: float | None = None
) -> Iterator[tuple[MetricSeries, Iterator[Point]]]:
    """:func:`metric_series` as a stream of points (``series.points`` stays empty), for series
    too long to hold twice; valid inside the ``with`` block only."""
    ns = namespace or jc.namespace
    job = jc.find(R.TRAINJOB, name, ns)
    uid = str(((job or {}).get("metadata") or {}).get("uid") or "") or None
    series = MetricSeries(ns, name, uid, job, jc.conn.local)
    history = None
    if jc.conn.local:
        from kubetrain.local.daemon.control import default_home
        from kubetrain.local.history import MetricsHistory

        history = MetricsHistory.open_for_reading(default_home())
    try:
        stream = history.iter_series(ns, name, uid, after=after) if history else iter(())
        first = next(stream, None)
        if first is not None:
            points: Iterator[Point] = itertools.chain([first], stream)
        elif job is not None and (after is None or not jc.conn.local):
            latest = latest_only(job)
            series.latest_only = bool(latest)
            points = iter(latest)
        else:
            points = iter(())
        if job is None and first is None:
            raise ClientError(f'trainjobs.trainer.kubeflow.org "{name}" not found')
        yield series, points
    finally:
        if history is not None:
            history.close()
