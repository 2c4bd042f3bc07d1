"""TrainJob conditions as the controller needs them: look-ups, an upsert, terminal stickiness.

Upstream's condition rules (Suspended/Resumed, the active deadline, JobSet's Complete/Failed)
live in ``kubetrain.runtime.status``; this module adds only the controller's own rule that a
terminal state never changes (``keep_terminal``). Pure functions, ``now`` passed in.
"""

from __future__ import annotations

import copy
from datetime import datetime

from kubetrain.api.access import list_at
from kubetrain.api.meta import condition_true, find_condition, parse_time
from kubetrain.api.meta import set_condition as set_meta_condition
from kubetrain.api.types import Obj

__all__ = [
    "COMPLETE",
    "FAILED",
    "SUSPENDED",
    "find",
    "is_finished",
    "is_true",
    "keep_terminal",
    "parse_time",
    "set_condition",
]

SUSPENDED = "Suspended"  # for reading; upstream's Suspended rule lives in kubetrain.runtime.status
COMPLETE = "Complete"
FAILED = "Failed"


def find(status: Obj | None, type_: str) -> Obj | None:
    """A copy of the condition of ``type_`` in ``status``, if any."""
    cond = find_condition(list_at(status, "conditions"), type_)
    return dict(cond) if cond is not None else None


def is_true(status: Obj | None, type_: str) -> bool:
    return condition_true(list_at(status, "conditions"), type_)


def is_finished(status: Obj | None) -> bool:
    """Complete or Failed is True: the TrainJob never runs (again)."""
    return is_true(status, COMPLETE) or is_true(status, FAILED)


def set_condition(
    status: Obj,
    type_: str,
    cond_status: str,
    reason: str,
    message: str,
    now: datetime,
    *,
    observed_generation: int | None = None,
) -> None:
    """Upsert a condition of ``status`` in place; ``lastTransitionTime`` moves only when
    ``status`` changes (``meta.SetStatusCondition``)."""
    conditions: list[Obj] = [dict(c) for c in list_at(status, "conditions")]
    new: Obj = {"type": type_, "status": cond_status, "reason": reason, "message": message}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    set_meta_condition(conditions, new, now)
    status["conditions"] = conditions


def keep_terminal(old: Obj | None, new: Obj) -> Obj:
    """``new`` with the terminal state of ``old`` kept exactly: once Complete or Failed, a job
    stays so, with the same reason, message and time (a vanished or changed JobSet cannot undo
    it, and it cannot flip between Complete and Failed)."""
    if not is_finished(old):
        return new
    result = copy.deepcopy(new)
    terminal = [
        c
        for c in list_at(old, "conditions")
        if c.get("type") in (COMPLETE, FAILED) and c.get("status") == "True"
    ]
    others = [c for c in list_at(result, "conditions") if c.get("type") not in (COMPLETE, FAILED)]
    result["conditions"] = others + [dict(c) for c in terminal]
    return result
