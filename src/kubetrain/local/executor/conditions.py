"""JobSet status conditions, updated the way JobSet's controller updates them.

A condition type that is absent is only ever added with status True; one that is present keeps
its ``lastTransitionTime`` unless its status flips; StartupPolicyInProgress and
StartupPolicyCompleted exclude each other. Each change yields one Event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .labels import COND_STARTUP_COMPLETED, COND_STARTUP_IN_PROGRESS

__all__ = ["EventSpec", "set_condition"]


@dataclass(frozen=True)
class EventSpec:
    """An Event to record against the JobSet: ``type`` is Normal or Warning."""

    type: str
    reason: str
    message: str


_EXCLUSIVE = {
    (COND_STARTUP_IN_PROGRESS, COND_STARTUP_COMPLETED),
    (COND_STARTUP_COMPLETED, COND_STARTUP_IN_PROGRESS),
}


def set_condition(
    conditions: list[dict[str, Any]],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    *,
    now: str,
    warning: bool = False,
) -> EventSpec | None:
    """Apply one condition to ``conditions`` in place; the Event to emit when anything changed."""
    changed = False
    found = False
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    for i, cur in enumerate(conditions):
        if cur.get("type") == ctype:
            found = True
            if cur.get("status") != status:
                conditions[i] = new
                changed = True
            elif cur.get("reason") != reason or cur.get("message") != message:
                conditions[i] = {**new, "lastTransitionTime": cur.get("lastTransitionTime", now)}
                changed = True
        elif (
            (cur.get("type"), ctype) in _EXCLUSIVE
            and cur.get("status") == "True"
            and status == "True"
        ):
            conditions[i] = {**cur, "status": "False"}
            changed = True
    if not found and status == "True":
        conditions.append(new)
        changed = True
    if not changed:
        return None
    return EventSpec("Warning" if warning else "Normal", reason, message)
