"""The series of progress reports a TrainJob sent, wherever it is kept.

The local engine keeps every accepted report (``kubetrain.local.history``); a cluster keeps only
the latest one, in ``status.trainerStatus``. ``kubetrain metrics`` and the dashboard both read
through :func:`metric_series`, so they always show the same points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.client import resources as R
from kubetrain.client.errors import ClientError

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.local.history import Point

__all__ = ["MetricSeries", "latest_only", "metric_columns", "metric_names", "metric_series"]


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


def metric_names(points: Sequence[Point], only: Sequence[str] | None = None) -> list[str]:
    """Metric names in order of first appearance (restricted to ``only`` when given)."""
    names: dict[str, None] = {}
    for p in points:
        names.update(dict.fromkeys(p.metrics))
    return [n for n in names if not only or n in only]


def metric_columns(points: Sequence[Point]) -> dict[str, list[float | None]]:
    """Each metric that has a numeric value, as one column over ``points`` (None where a point
    lacks it or it is not a number: values travel as strings)."""
    from kubetrain.local.history import as_number

    columns: dict[str, list[float | None]] = {}
    for name in metric_names(points):
        raw = [p.metrics.get(name) for p in points]
        column = [as_number(v) if v is not None else None for v in raw]
        if any(v is not None for v in column):
            columns[name] = column
    return columns


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
    ns = namespace or jc.namespace
    job = jc.find(R.TRAINJOB, name, ns)
    uid = str(((job or {}).get("metadata") or {}).get("uid") or "") or None
    series = MetricSeries(ns, name, uid, job, jc.conn.local)
    if jc.conn.local:
        from kubetrain.local.daemon.control import default_home
        from kubetrain.local.history import MetricsHistory

        history = MetricsHistory.open_for_reading(default_home())
        if history is not None:
            try:
                series.points = history.series(ns, name, uid, after=after)
            finally:
                history.close()
    if not series.points and job is not None and (after is None or not jc.conn.local):
        series.points = latest_only(job)
        series.latest_only = bool(series.points)
    if job is None and not series.points:
        raise ClientError(f'trainjobs.trainer.kubeflow.org "{name}" not found')
    return series
