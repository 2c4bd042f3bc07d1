"""What the JobSet logic answers: the next steps and the new status (plain values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .conditions import EventSpec
from .jobs import POD_FAILURE_BACKOFF_MAX_S, POD_FAILURE_BACKOFF_S

__all__ = ["Decision", "PodDeletion", "Settings"]


@dataclass(frozen=True)
class Settings:
    """Knobs a cluster hard-codes; tests shorten the back-off."""

    node_name: str = "kubetrain"
    # The Job controller's pod-failure back-off (`jobs.JobView.backoff_left`).
    pod_failure_backoff_s: float = POD_FAILURE_BACKOFF_S
    pod_failure_backoff_max_s: float = POD_FAILURE_BACKOFF_MAX_S


@dataclass(frozen=True)
class PodDeletion:
    name: str
    # Why, in the words of the Event the deletion is recorded with.
    reason: str


@dataclass
class Decision:
    """What to do next. ``status`` is the whole new JobSet status."""

    status: dict[str, Any]
    status_changed: bool = False
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[PodDeletion] = field(default_factory=list)
    events: list[EventSpec] = field(default_factory=list)
    # Call again after this many seconds even if nothing changes (back-off, TTL).
    requeue_after: float | None = None
    # ttlSecondsAfterFinished ran out: delete the JobSet itself.
    delete_jobset: bool = False
