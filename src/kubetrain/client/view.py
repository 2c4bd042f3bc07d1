"""What a person (or script) sees of a TrainJob: state, runtime, size, steps, conditions.

The state comes from :mod:`kubetrain.runtime`'s one state machine; this module only gathers the
inputs (the TrainJob and its pods) and names things.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.meta import parse_time
from kubetrain.client.steps import Step

__all__ = ["JobView", "age", "parse_time", "terminal_condition"]


def age(value: Any, now: datetime | None = None) -> str:
    """kubectl's short age: ``42s``, ``5m10s``, ``3h``, ``2d4h``; ``<unknown>`` without a time."""
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    seconds = max(0, int(((now or datetime.now(UTC)) - when).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if days < 2:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def terminal_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ``Complete`` or ``Failed`` condition that is True, if the job has finished."""
    for cond in list_at(obj, "status", "conditions"):
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return dict(cond)
    return None


@dataclass
class JobView:
    """A TrainJob as shown by ``get``/``describe``/``run`` and returned by the SDK."""

    name: str
    namespace: str
    state: str
    runtime_kind: str
    runtime_name: str
    num_nodes: int | None
    created: str
    suspended: bool
    steps: list[Step] = field(default_factory=list)
    obj: dict[str, Any] = field(default_factory=dict)

    @property
    def conditions(self) -> list[dict[str, Any]]:
        return list(list_at(self.obj, "status", "conditions"))

    @property
    def message(self) -> str:
        """Why the job ended (``Reason: message``), else the newest condition's; may be empty."""
        cond = terminal_condition(self.obj) or (self.conditions[-1] if self.conditions else None)
        if not cond:
            return ""
        reason, msg = cond.get("reason") or "", cond.get("message") or ""
        return f"{reason}: {msg}" if reason and msg else str(reason or msg)

    @property
    def progress(self) -> dict[str, Any]:
        """``status.trainerStatus`` (progress %, ETA, metrics) when the training code reports it."""
        return dict(obj_at(self.obj, "status", "trainerStatus"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "state": self.state,
            "runtime": {"kind": self.runtime_kind, "name": self.runtime_name},
            "numNodes": self.num_nodes,
            "created": self.created,
            "suspended": self.suspended,
            "steps": [s.as_dict() for s in self.steps],
        }
