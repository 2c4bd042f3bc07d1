"""meta/v1 helpers every layer needs: times as Kubernetes writes them, status conditions, and
the ``Status`` an API request fails with.

Written once here (shape only, no I/O): the runtime's status derivation, the controller, the
local executor and the SDK's views all read and write ``metav1.Time`` and ``metav1.Condition``
through these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "condition_true",
    "failure_status",
    "find_condition",
    "format_time",
    "now",
    "parse_time",
    "set_condition",
]

Obj = dict[str, Any]
_WIRE = "%Y-%m-%dT%H:%M:%SZ"


def now() -> datetime:
    """The wall clock in UTC: what loops read where no clock is injected."""
    return datetime.now(UTC)


def format_time(t: datetime) -> str:
    """``metav1.Time`` on the wire: RFC 3339 in UTC, whole seconds, ``Z``."""
    return t.astimezone(UTC).strftime(_WIRE)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (or a datetime) as an aware datetime; None when missing or malformed."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:  # the common case first: what format_time writes
        return datetime.strptime(value, _WIRE).replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def find_condition(conditions: Any, type_: str) -> Obj | None:
    """The condition of ``type_`` in a conditions list (anything else: None)."""
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def condition_true(conditions: Any, type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.get("status") == "True"


def set_condition(conditions: list[Any], new: Obj, now: datetime) -> None:
    """``meta.SetStatusCondition``: upsert by type; the transition time moves only on a flip."""
    existing = find_condition(conditions, str(new.get("type")))
    if existing is None:
        cond = dict(new)
        if not cond.get("lastTransitionTime"):
            cond["lastTransitionTime"] = format_time(now)
        conditions.append(_ordered(cond))
        return
    if existing.get("status") != new.get("status"):
        existing["status"] = new.get("status")
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or format_time(now)
    existing["reason"] = new.get("reason", "")
    existing["message"] = new.get("message", "")
    if new.get("observedGeneration"):
        existing["observedGeneration"] = new["observedGeneration"]
    else:
        existing.pop("observedGeneration", None)


def _ordered(cond: Obj) -> Obj:
    # metav1.Condition's field order on the wire.
    out: Obj = {"type": cond.get("type"), "status": cond.get("status")}
    if cond.get("observedGeneration"):
        out["observedGeneration"] = cond["observedGeneration"]
    out["lastTransitionTime"] = cond.get("lastTransitionTime")
    out["reason"] = cond.get("reason", "")
    out["message"] = cond.get("message", "")
    return out


# StatusDetails' fields in kube-apiserver's order; any others follow.
_DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")


def failure_status(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> Obj:
    """The ``metav1.Status`` of a failed request, fields in kube-apiserver's order.

    Clients compare the body as text (the official client's create_from_yaml errors do), so
    every server here (the API server, its token endpoints, the status server) answers this one.
    """
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = {
            **{k: details[k] for k in _DETAILS_ORDER if k in details},
            **{k: v for k, v in details.items() if k not in _DETAILS_ORDER},
        }
    body["code"] = code
    return body
