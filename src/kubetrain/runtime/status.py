"""TrainJob status as upstream's reconcile computes it (trainer v2.3.0 pkg/controller/trainjob_controller.go steps 3-7), and one state enum.

``derive`` is pure: the current TrainJob, its JobSet (or None) and ``now`` in; the new status, the
deadline's requeue delay and whether the JobSet must be deleted out. Conditions follow
``meta.SetStatusCondition``: an existing condition keeps its ``lastTransitionTime`` unless its
status flips. Only upstream's condition types appear (Suspended, Complete, Failed), so the
official SDK shows a running job as Running (kubeflow/sdk 0.5.0 kubeflow/trainer/backends/kubernetes/backend.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.meta import (
    condition_true,
    find_condition,
    parse_time,
    set_condition,
)
from kubetrain.runtime.podspec import Obj, tree_copy

__all__ = [
    "STATE_TABLE",
    "JobState",
    "StatusUpdate",
    "derive",
    "derive_status",
    "is_finished",
    "job_state",
    "jobset_status_to_trainjob",
]

SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_MESSAGE = "TrainJob exceeded its active deadline"


class JobState(StrEnum):
    """One canonical state per TrainJob, for people and for the client (not written anywhere)."""

    CREATED = "Created"
    SUSPENDED = "Suspended"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"

    def is_terminal(self) -> bool:
        """Complete and Failed are final: nothing is (re)applied after them."""
        return self in (JobState.COMPLETE, JobState.FAILED)


# How upstream's TrainJob status maps to JobState, first matching row wins.
STATE_TABLE: tuple[tuple[str, JobState], ...] = (
    ("condition Complete=True", JobState.COMPLETE),
    ("condition Failed=True", JobState.FAILED),
    ("spec.suspend=true or condition Suspended=True", JobState.SUSPENDED),
    ("some jobsStatus entry has active or ready > 0", JobState.RUNNING),
    ("otherwise", JobState.CREATED),
)


def is_finished(status: Obj) -> bool:
    """Complete=True or Failed=True."""
    conds = list_at(status, "conditions")
    return condition_true(conds, "Complete") or condition_true(conds, "Failed")


def jobset_status_to_trainjob(job: Obj, jobset: Obj | None, now: datetime) -> Obj | None:
    """The JobSet plugin's status: Complete/Failed copied from the JobSet, and jobsStatus.

    ``None`` means "keep the status as it is" (no JobSet; upstream errors unless finished).
    """
    if jobset is None:
        return None
    status: Obj = tree_copy(obj_at(job, "status"))
    conditions = list_at(status, "conditions")
    js_status = obj_at(jobset, "status")
    js_conds = list_at(js_status, "conditions")
    for js_type, tj_type in (("Completed", "Complete"), ("Failed", "Failed")):
        c = find_condition(js_conds, js_type)
        if c is not None and c.get("status") == "True":
            set_condition(conditions, {**c, "type": tj_type}, now)
    if conditions:
        status["conditions"] = conditions
    jobs = [
        {
            "name": r.get("name", ""),
            "ready": r.get("ready", 0),
            "succeeded": r.get("succeeded", 0),
            "failed": r.get("failed", 0),
            "active": r.get("active", 0),
            "suspended": r.get("suspended", 0),
        }
        for r in map(as_dict, list_at(js_status, "replicatedJobsStatus"))
    ]
    if jobs:
        status["jobsStatus"] = jobs
    else:
        status.pop("jobsStatus", None)
    return status


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """What one reconcile decides about status."""

    status: Obj
    """The new ``.status`` (``{}`` when empty)."""
    requeue_after: float | None = None
    """Seconds until the active deadline (>= 1), when one is pending."""
    delete_jobset: bool = False
    """The deadline passed just now: upstream deletes the JobSet."""


def derive(
    job: Obj,
    jobset: Obj | None,
    *,
    now: datetime,
    unsupported_runtime: str | None = None,
) -> StatusUpdate:
    """trainer v2.3.0 pkg/controller/trainjob_controller.go steps 3 and 5-7 (and step 4's unsupported-runtime condition).

    ``unsupported_runtime`` is the registry key when the runtimeRef names no known runtime kind.
    """
    spec = obj_at(job, "spec")
    status = tree_copy(obj_at(job, "status"))
    conditions = list_at(status, "conditions")
    # Step 3: a Failed condition is re-derived every time, except the sticky deadline one.
    failed = find_condition(conditions, "Failed")
    if failed is not None and failed.get("reason") != "DeadlineExceeded":
        conditions.remove(failed)
    if unsupported_runtime is not None:
        set_condition(
            conditions,
            {
                "type": "Failed",
                "status": "True",
                "reason": "TrainingRuntimeNotSupported",
                "message": f"unsupported runtime: {unsupported_runtime}",
            },
            now,
        )
    # Step 5. A finished job is not suspended after the fact: its
    # state stays Complete or Failed, alone.
    before = list_at(job, "status", "conditions")
    finished = condition_true(before, "Complete") or condition_true(before, "Failed")
    if spec.get("suspend") is True and not finished:
        set_condition(
            conditions,
            {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": SUSPENDED_MESSAGE,
            },
            now,
        )
    elif condition_true(conditions, "Suspended"):
        set_condition(
            conditions,
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "message": RESUMED_MESSAGE,
            },
            now,
        )
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    # Step 6: the JobSet's view replaces the status; a deadline failure survives it.
    deadline_cond = find_condition(conditions, "Failed")
    if deadline_cond is not None and deadline_cond.get("reason") != "DeadlineExceeded":
        deadline_cond = None
    from_jobset = jobset_status_to_trainjob({**job, "status": status}, jobset, now)
    if from_jobset is not None:
        status = from_jobset
    if deadline_cond is not None:
        conds = list_at(status, "conditions")
        set_condition(conds, deadline_cond, now)
        status["conditions"] = conds
    # Step 7.
    requeue: float | None = None
    delete = False
    deadline_s = spec.get("activeDeadlineSeconds")
    if (
        isinstance(deadline_s, int)
        and not isinstance(deadline_s, bool)
        and deadline_s > 0
        and not is_finished(status)
        and spec.get("suspend") is not True
    ):
        start = parse_time(obj_at(job, "metadata").get("creationTimestamp"))
        suspended = find_condition(list_at(status, "conditions"), "Suspended")
        if suspended is not None and suspended.get("status") == "False":
            start = parse_time(suspended.get("lastTransitionTime"))
        if start is not None:
            deadline = start + timedelta(seconds=deadline_s)
            if now > deadline:
                conds = list_at(status, "conditions")
                set_condition(
                    conds,
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "DeadlineExceeded",
                        "message": DEADLINE_MESSAGE,
                    },
                    now,
                )
                status["conditions"] = conds
                delete = True
            else:
                requeue = max((deadline - now).total_seconds(), 1.0)
    return StatusUpdate(status=status, requeue_after=requeue, delete_jobset=delete)


def derive_status(job: Obj, jobset: Obj | None, *, now: datetime) -> Obj:
    """The TrainJob ``.status`` after one reconcile (see ``derive`` for the deadline outputs)."""
    return derive(job, jobset, now=now).status


def job_state(job: Obj) -> JobState:
    """Map a TrainJob to ``JobState`` through ``STATE_TABLE``."""
    status = obj_at(job, "status")
    conds = list_at(status, "conditions")
    if condition_true(conds, "Complete"):
        return JobState.COMPLETE
    if condition_true(conds, "Failed"):
        return JobState.FAILED
    if obj_at(job, "spec").get("suspend") is True or condition_true(conds, "Suspended"):
        return JobState.SUSPENDED
    for js in list_at(status, "jobsStatus"):
        if isinstance(js, dict) and (js.get("active", 0) or js.get("ready", 0)):
            return JobState.RUNNING
    return JobState.CREATED
