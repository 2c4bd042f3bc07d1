"""The metrics history: every accepted report kept, per TrainJob uid, bounded without losing the curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.local.history import HISTORY_FILE, MetricsHistory, as_number, columns_of


def status(step: int, loss: float) -> dict[str, object]:
    return {
        "progressPercentage": step,
        "estimatedRemainingSeconds": 100 - step,
        "metrics": [{"name": "loss", "value": str(loss)}, {"name": "step", "value": str(step)}],
        "lastUpdatedTime": f"2026-11-29T08:00:{step % 60:02d}Z",
    }


def test_series_come_back_in_order_with_their_fields(tmp_path: Path) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE)
    for step in range(3):
        h.record("ns", "job", "uid-1", status(step, 1.0 / (step + 1)), received=1000.0 + step)
    points = h.series("ns", "job")
    assert [p.progress for p in points] == [0, 1, 2]
    assert points[1].metrics == {"loss": "0.5", "step": "1"}
    assert points[2].as_dict()["estimatedRemainingSeconds"] == 98
    assert points[0].received == 1000.0


def test_a_reader_extending_its_curves_gets_only_later_points(tmp_path: Path) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE)
    for step in range(4):
        h.record("ns", "job", "u", status(step, 1.0), received=1000.0 + step)
    assert [p.progress for p in h.series("ns", "job", after=1001.0)] == [2, 3]
    assert h.series("ns", "job", after=1003.0) == []


def test_a_recreated_job_starts_a_new_series(tmp_path: Path) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE)
    h.record("ns", "job", "old", status(50, 0.3))
    h.record("ns", "job", "new", status(1, 2.0))
    assert [p.progress for p in h.series("ns", "job")] == [1]
    assert [p.progress for p in h.series("ns", "job", uid="old")] == [50]
    assert h.series("other", "job") == []


def test_a_long_series_is_thinned_keeping_its_start_and_recent_points(tmp_path: Path) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE, max_points=100)
    for step in range(1000):
        h.record("ns", "job", "u", status(step % 101, float(step)), received=float(step))
    points = h.series("ns", "job")
    assert len(points) <= 100
    received = [p.received for p in points]
    assert received[0] == 0.0  # the first point always stays
    assert received[-1] == 999.0
    assert received[-20:] == [float(s) for s in range(980, 1000)]  # recent points dense
    assert received == sorted(received)


def test_only_the_most_recent_jobs_are_kept(tmp_path: Path) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE, max_jobs=3)
    for i in range(5):
        h.record("ns", f"job{i}", f"u{i}", status(1, 1.0))
    kept = [i for i in range(5) if h.series("ns", f"job{i}")]
    assert kept == [2, 3, 4]


def test_a_reader_sees_the_writers_points_and_never_creates_the_file(tmp_path: Path) -> None:
    assert MetricsHistory.open_for_reading(tmp_path) is None
    assert not (tmp_path / HISTORY_FILE).exists()
    writer = MetricsHistory(tmp_path / HISTORY_FILE)
    writer.record("ns", "job", "u", status(7, 0.7))
    reader = MetricsHistory.open_for_reading(tmp_path)
    assert reader is not None
    assert [p.progress for p in reader.series("ns", "job")] == [7]
    reader.close()
    writer.close()


def test_values_read_as_numbers_when_they_are_numbers() -> None:
    assert as_number("0.25") == 0.25
    assert as_number("1e-3") == 0.001
    assert as_number("warm") is None


def test_finding_8_a_value_sqlite_cannot_hold_is_left_out_not_a_failed_write(
    tmp_path: Path,
) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE)
    h.record("ns", "job", "u", {**status(1, 1.0), "estimatedRemainingSeconds": 10**26})
    (point,) = h.series("ns", "job")
    assert point.progress == 1 and point.eta is None


def reports(*metric_maps: dict[str, str]) -> list[dict[str, object]]:
    return [
        {
            "progressPercentage": i * 10 if i % 2 == 0 else None,
            "metrics": [{"name": k, "value": v} for k, v in m.items()],
        }
        for i, m in enumerate(metric_maps)
    ]


@pytest.mark.parametrize(
    ("series", "after"),
    [
        pytest.param(
            reports({"loss": "2.5", "lr": "0.1"}, {"loss": "1.25", "lr": "0.05"}),
            None,
            id="plain numbers",
        ),
        pytest.param(
            reports({"loss": "2"}, {"loss": "1", "acc": "0.5"}, {"acc": "0.75"}),
            None,
            id="metrics that start late and stop early",
        ),
        pytest.param(
            reports({"loss": "nan"}, {"loss": "1e-3"}, {"loss": "inf"}),
            None,
            id="nan, exponents and inf",
        ),
        pytest.param(
            reports({"loss": " 1.5"}, {"loss": "1_000"}), None, id="numbers only float() reads"
        ),
        pytest.param(
            reports({"loss": "2", "phase": "warmup"}, {"loss": "1", "phase": "train"}),
            None,
            id="a metric that is not a number",
        ),
        pytest.param(
            reports({"loss": "3"}, {"loss": "2"}, {"loss": "1"}),
            1001.0,
            id="only points after a time",
        ),
        pytest.param([], None, id="no points"),
    ],
)
def test_columns_read_in_c_equal_columns_built_from_the_points(
    tmp_path: Path, series: list[dict[str, object]], after: float | None
) -> None:
    h = MetricsHistory(tmp_path / HISTORY_FILE)
    for i, report in enumerate(series):
        h.record("ns", "job", "u", report, received=1000.0 + i)
    fast = h.columns("ns", "job", after=after)
    slow = columns_of(h.iter_series("ns", "job", after=after))
    assert repr(fast) == repr(slow)  # repr: nan == nan
    assert len(fast.x) == len(series) - (0 if after is None else 2)
