"""Metric series as chart columns: one pass, metrics in order of first appearance, gaps as None."""

from __future__ import annotations

import pytest

from kubetrain.client.metrics import metric_columns
from kubetrain.local.history import Point


def pt(t: float, progress: int | None = None, **metrics: str) -> Point:
    return Point(received=t, updated="", progress=progress, metrics=metrics)


@pytest.mark.parametrize(
    ("points", "metrics"),
    [
        pytest.param(
            [pt(1, loss="2.0"), pt(2, loss="1.5")],
            {"loss": [2.0, 1.5]},
            id="one metric, every point",
        ),
        pytest.param(
            [pt(1, loss="2.0"), pt(2, loss="1.5", acc="0.5")],
            {"loss": [2.0, 1.5], "acc": [None, 0.5]},
            id="a metric that starts later is None before it",
        ),
        pytest.param(
            [pt(1, loss="2.0", lr="0.1"), pt(2, loss="1.0")],
            {"loss": [2.0, 1.0], "lr": [0.1, None]},
            id="a metric a point lacks is None there",
        ),
        pytest.param(
            [pt(1, loss="2.0", phase="warmup"), pt(2, loss="1.0", phase="train")],
            {"loss": [2.0, 1.0]},
            id="a metric that never reads as a number is left out",
        ),
        pytest.param([], {}, id="no points, no columns"),
    ],
)
def test_columns(points: list[Point], metrics: dict[str, list[float | None]]) -> None:
    columns = metric_columns(iter(points))  # a stream is enough: one pass
    assert columns.metrics == metrics
    assert list(columns.metrics) == list(metrics)  # order of first appearance
    assert columns.x == [p.received for p in points]


def test_progress_travels_beside_the_metrics() -> None:
    columns = metric_columns([pt(1, 10, loss="1"), pt(2, None, loss="0.5"), pt(3, 30)])
    assert columns.progress == [10, None, 30]
    assert columns.metrics == {"loss": [1.0, 0.5, None]}
