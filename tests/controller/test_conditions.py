"""Condition rules: upserts, the Suspended rule, terminal stickiness, the active deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubetrain.api.types import Obj
from kubetrain.controller import conditions as c

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)


def cond(type_: str, status: str, reason: str = "R", at: datetime = T0) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": c.time_str(at),
    }


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    status: Obj = {"conditions": [cond("Suspended", "True", "Suspended", T0)]}
    c.set_condition(status, "Suspended", "True", "Suspended", "again", T0 + timedelta(hours=1))
    assert status["conditions"][0]["lastTransitionTime"] == c.time_str(T0)
    c.set_condition(status, "Suspended", "False", "Resumed", "x", T0 + timedelta(hours=1))
    assert status["conditions"][0]["lastTransitionTime"] == c.time_str(T0 + timedelta(hours=1))


@pytest.mark.parametrize(
    ("suspend", "before", "after"),
    [
        (True, [], ("True", "Suspended")),
        (False, [cond("Suspended", "True", "Suspended")], ("False", "Resumed")),
        (False, [], None),
        (False, [cond("Suspended", "False", "Resumed")], ("False", "Resumed")),
    ],
    ids=[
        "a suspended job gets Suspended=True",
        "unsuspending a suspended job records Resumed",
        "a job never suspended gets no Suspended condition",
        "a resumed job stays resumed",
    ],
)
def test_suspended_condition(
    suspend: bool, before: list[Obj], after: tuple[str, str] | None
) -> None:
    status: Obj = {"conditions": before}
    c.suspended_condition(status, suspend, T0, 1)
    found = c.find(status, "Suspended")
    if after is None:
        assert found is None
    else:
        assert found is not None
        assert (found["status"], found["reason"]) == after


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


def job(deadline: int | None, *, suspend: bool = False, created: datetime = T0) -> Obj:
    spec: Obj = {"suspend": suspend}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"metadata": {"creationTimestamp": c.time_str(created)}, "spec": spec}


@pytest.mark.parametrize(
    ("trainjob", "status", "now", "expected"),
    [
        (job(None), {}, T0, None),
        (job(60), {}, T0 + timedelta(seconds=20), 40.0),
        (job(60), {}, T0 + timedelta(seconds=61), -1.0),
        (job(60, suspend=True), {}, T0 + timedelta(seconds=90), None),
        (
            job(60),
            {"conditions": [cond("Suspended", "False", "Resumed", T0 + timedelta(seconds=100))]},
            T0 + timedelta(seconds=130),
            30.0,
        ),
        (job(60), {"conditions": [cond("Complete", "True")]}, T0 + timedelta(seconds=90), None),
    ],
    ids=[
        "no deadline, no timer",
        "the timer runs from creation",
        "past the deadline the remainder is negative",
        "a suspended job's timer is paused",
        "the timer restarts at resume",
        "a finished job has no timer",
    ],
)
def test_deadline_remaining(
    trainjob: Obj, status: Obj, now: datetime, expected: float | None
) -> None:
    assert c.deadline_remaining(trainjob, status, now) == expected
