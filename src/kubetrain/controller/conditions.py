"""TrainJob conditions as the controller needs them: look-ups, an upsert, terminal stickiness.

Upstream's condition rules (Suspended/Resumed, the active deadline, JobSet's Complete/Failed)
live in ``kubetrain.runtime.status``; this module adds only the controller's own rule that a
terminal state never changes (``keep_terminal``). Pure functions, ``now`` passed in.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

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
    "time_str",
]

SUSPENDED = "Suspended"  # for reading; upstream's Suspended rule lives in kubetrain.runtime.status
COMPLETE = "Complete"
FAILED = "Failed"


def time_str(t: datetime) -> str:
    """metav1.Time: RFC 3339, UTC, whole seconds."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def find(status: Obj | None, type_: str) -> Obj | None:
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(status: Obj | None, type_: str) -> bool:
    cond = find(status, type_)
    return cond is not None and cond.get("status") == "True"


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
    """Upsert a condition in place; ``lastTransitionTime`` moves only when ``status`` changes."""
    conditions: list[Obj] = list(status.get("conditions") or [])
    new: Obj = {
        "type": type_,
        "status": cond_status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": time_str(now),
    }
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    for i, old in enumerate(conditions):
        if old.get("type") == type_:
            if old.get("status") == cond_status and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            conditions[i] = new
            break
    else:
        conditions.append(new)
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
        for c in (old or {}).get("conditions") or []
        if c.get("type") in (COMPLETE, FAILED) and c.get("status") == "True"
    ]
    others = [c for c in result.get("conditions") or [] if c.get("type") not in (COMPLETE, FAILED)]
    result["conditions"] = others + [dict(c) for c in terminal]
    return result
