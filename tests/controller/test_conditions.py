"""Condition rules: upserts, the Suspended rule, terminal stickiness, the active deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.api.meta import format_time
from kubetrain.api.types import Obj
from kubetrain.controller import conditions as c

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)


def cond(type_: str, status: str, reason: str = "R", at: datetime = T0) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": format_time(at),
    }


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    status: Obj = {"conditions": [cond("Suspended", "True", "Suspended", T0)]}
    c.set_condition(status, "Suspended", "True", "Suspended", "again", T0 + timedelta(hours=1))
    assert status["conditions"][0]["lastTransitionTime"] == format_time(T0)
    c.set_condition(status, "Suspended", "False", "Resumed", "x", T0 + timedelta(hours=1))
    assert status["conditions"][0]["lastTransitionTime"] == format_time(T0 + timedelta(hours=1))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            [cond("Complete", "True", "AllJobsCompleted")],
            [],
            [("Complete", "True", "AllJobsCompleted")],
        ),
        (
            [cond("Failed", "True", "DeadlineExceeded")],
            [cond("Complete", "True", "AllJobsCompleted")],
            [("Failed", "True", "DeadlineExceeded")],
        ),
        (
            [],
            [cond("Complete", "True", "AllJobsCompleted")],
            [("Complete", "True", "AllJobsCompleted")],
        ),
        (
            [cond("Suspended", "False", "Resumed"), cond("Failed", "True", "FailedJobs")],
            [cond("Suspended", "False", "Resumed")],
            [("Suspended", "False", "Resumed"), ("Failed", "True", "FailedJobs")],
        ),
    ],
    ids=[
        "a completed job stays complete when its JobSet vanishes",
        "a failed job cannot turn complete",
        "a running job takes what its JobSet says",
        "other conditions follow the new status, the terminal one stays",
    ],
)
def test_keep_terminal(
    old: list[Obj], new: list[Obj], expected: list[tuple[str, str, str]]
) -> None:
    result = c.keep_terminal({"conditions": old}, {"conditions": new})
    assert [(x["type"], x["status"], x["reason"]) for x in result["conditions"]] == expected
