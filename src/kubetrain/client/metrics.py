"""The series of progress reports a TrainJob sent, wherever it is kept.

The local engine keeps every accepted report (``kubetrain.local.history``); a cluster keeps only
the latest one, in ``status.trainerStatus``. ``kubetrain metrics`` (:func:`metric_series`) and
the dashboard (:func:`series_columns`) find the job and its history the same way, so they always
show the same points.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import list_at, obj_at
from kubetrain.client import resources as R
from kubetrain.client.errors import ClientError
from kubetrain.local.history import Columns as MetricColumns

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.local.history import MetricsHistory, Point

__all__ = [
    "MetricColumns",
    "MetricSeries",
    "latest_only",
    "metric_columns",
    "metric_names",
    "metric_points",
    "metric_series",
    "series_columns",
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
        return str(obj_at(self.job, "status", "trainerStatus").get("lastUpdatedTime") or "")


def metric_names(points: Sequence[Point], only: Sequence[str] | None = None) -> list[str]:
    """Metric names in order of first appearance (restricted to ``only`` when given)."""
    names: dict[str, None] = {}
    for p in points:
        names.update(dict.fromkeys(p.metrics))
    return [n for n in names if not only or n in only]


def metric_columns(points: Iterable[Point]) -> MetricColumns:
    """One pass over ``points`` (which may be a stream); metrics in order of first appearance."""
    from kubetrain.local.history import columns_of

    return columns_of(points)


def latest_only(job: dict[str, Any]) -> list[Point]:
    """The one point a cluster keeps: ``status.trainerStatus``."""
    from kubetrain.local.history import Point

    ts = obj_at(job, "status", "trainerStatus")
    if not ts:
        return []
    return [
        Point(
            received=0.0,
            updated=str(ts.get("lastUpdatedTime") or ""),
            progress=ts.get("progressPercentage"),
            eta=ts.get("estimatedRemainingSeconds"),
            metrics={str(m.get("name")): str(m.get("value")) for m in list_at(ts, "metrics")},
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
def _opened(
    jc: JobClient, name: str, namespace: str | None
) -> Iterator[tuple[MetricSeries, MetricsHistory | None]]:
    """The job (if any) and, on the local engine, its metrics history opened for reading."""
    ns = namespace or jc.namespace
    job = jc.find(R.TRAINJOB, name, ns)
    uid = str(obj_at(job, "metadata").get("uid") or "") or None
    series = MetricSeries(ns, name, uid, job, jc.conn.local)
    history = None
    if jc.conn.local:
        from kubetrain.local.daemon.control import default_home
        from kubetrain.local.history import MetricsHistory

        history = MetricsHistory.open_for_reading(default_home())
    try:
        yield series, history
    finally:
        if history is not None:
            history.close()


@contextlib.contextmanager
def metric_points(
    jc: JobClient, name: str, namespace: str | None = None, *, after: float | None = None
) -> Iterator[tuple[MetricSeries, Iterator[Point]]]:
    """:func:`metric_series` as a stream of points (``series.points`` stays empty), for series
    too long to hold twice; valid inside the ``with`` block only."""
    with _opened(jc, name, namespace) as (series, history):
        ns, job = series.namespace, series.job
        stream = history.iter_series(ns, name, series.uid, after=after) if history else iter(())
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


def series_columns(
    jc: JobClient, name: str, namespace: str | None = None, *, after: float | None = None
) -> tuple[MetricSeries, MetricColumns]:
    """:func:`metric_series` as chart columns (see ``MetricsHistory.columns``: a long local
    series is read in C); the same points, in columns."""
    with _opened(jc, name, namespace) as (series, history):
        if history is not None:
            columns = history.columns(series.namespace, name, series.uid, after=after)
            if columns.x:
                return series, columns
    with metric_points(jc, name, namespace, after=after) as (series, points):
        return series, metric_columns(points)
