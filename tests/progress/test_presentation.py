"""How people see progress: the bar and metrics of ``kubetrain run``, the PROGRESS/ETA columns of ``get``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubetrain.cli.cmd_run import _status_text
from kubetrain.cli.present import metrics_text, progress_bar
from kubetrain.client.present import trainjob_headers, trainjob_row
from kubetrain.client.view import JobView

TRAINER_STATUS = {
    "progressPercentage": 45,
    "estimatedRemainingSeconds": 62,
    "metrics": [
        {"name": "loss", "value": "0.41"},
        {"name": "lr", "value": "0.001"},
        {"name": "epoch", "value": "3"},
        {"name": "acc", "value": "0.9"},
    ],
    "lastUpdatedTime": "2026-11-29T10:00:00Z",
}


def view(trainer_status: dict[str, object] | None = None) -> JobView:
    status = {"trainerStatus": trainer_status} if trainer_status else {}
    return JobView(
        name="demo",
        namespace="default",
        state="Running",
        runtime_kind="ClusterTrainingRuntime",
        runtime_name="torch-distributed",
        num_nodes=2,
        created="2026-11-29T09:59:00Z",
        suspended=False,
        obj={"status": status},
    )


@pytest.mark.parametrize(
    ("percent", "bar"),
    [
        pytest.param(0, "░" * 20, id="nothing done"),
        pytest.param(45, "█" * 9 + "░" * 11, id="45 percent"),
        pytest.param(100, "█" * 20, id="done"),
        pytest.param(150, "█" * 20, id="over 100 is clamped"),
    ],
)
def test_progress_bar(percent: int, bar: str) -> None:
    assert progress_bar(percent) == bar


def test_run_status_line_shows_bar_eta_and_latest_metrics() -> None:
    text = _status_text(view(TRAINER_STATUS), 12.0)
    assert "█████████░░░░░░░░░░░ 45%" in text
    assert "ETA 1m02s" in text
    assert "loss=0.41 lr=0.001 epoch=3" in text and "acc" not in text


def test_run_status_line_without_reports_has_no_bar() -> None:
    text = _status_text(view(), 3.0)
    assert "%" not in text and "ETA" not in text


def test_get_has_progress_and_eta_columns() -> None:
    headers = trainjob_headers(wide=False, all_namespaces=False)
    now = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    row = dict(
        zip(
            headers,
            trainjob_row(view(TRAINER_STATUS), wide=False, all_namespaces=False, now=now),
            strict=True,
        )
    )
    assert (row["PROGRESS"], row["ETA"]) == ("45%", "1m02s")
    empty = dict(
        zip(headers, trainjob_row(view(), wide=False, all_namespaces=False, now=now), strict=True)
    )
    assert (empty["PROGRESS"], empty["ETA"]) == ("-", "-")


def test_metrics_text_takes_the_first_few() -> None:
    assert metrics_text(TRAINER_STATUS, limit=2) == "loss=0.41 lr=0.001"
    assert metrics_text({}) == ""


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (12, "12s"),
        (185, "3m05s"),
        (3720, "1h02m"),
        (3 * 86400 + 4 * 3600, "3d04h"),
        (1e26, "-"),
        (float("nan"), "-"),
        (-5, "-"),
    ],
    ids=["seconds", "minutes", "hours", "days", "finding 8: 1e26 is unknown, not 27777777777777777777777h",
         "NaN", "negative"],
)  # fmt: skip
def test_eta_reads_as_a_duration(seconds: float, shown: str) -> None:
    from kubetrain.client.present import eta

    assert eta(seconds) == shown
