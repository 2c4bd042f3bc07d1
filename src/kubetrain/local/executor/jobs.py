"""Virtual batch/v1 Jobs, derived from the pods that exist.

The executor stores no Job objects: every fact a Job's status holds can be read back from its
pods, because terminal pods stay in the API until their Job is deleted (as on a cluster) and a
failed Job always moves its JobSet to a new restart attempt or to Failed in the same reconcile,
which the JobSet status records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.api.labels import (
    JOB_COMPLETION_INDEX,
    JOB_INDEX_LABEL,
    REPLICATED_JOB_NAME_LABEL,
    RESTART_ATTEMPT_LABEL,
)
from kubetrain.api.meta import parse_time

from .labels import BACKOFF_LIMIT_EXCEEDED_MESSAGE, BACKOFF_LIMIT_EXCEEDED_REASON
from .spec import ReplicatedJob

# A pod the local engine refused to run (see `settings.Refusal`); spelled here too because
# settings imports the JobSet logic.
REFUSED_REASON = "UnsupportedOnLocalEngine"
# A pod whose failure the engine judged final (`podrunner.FinalFailure`: an initializer that
# already retried what can be retried); its message is the container's termination message.
FINAL_FAILURE_REASON = "FailedForGood"
# Pods of these reasons fail their Job at once: a replacement could only fail the same way.
_FINAL_REASONS = (REFUSED_REASON, FINAL_FAILURE_REASON)
# The Job controller's pod-failure back-off: 10 s doubling per failure, at most 10 min.
POD_FAILURE_BACKOFF_S = 10.0
POD_FAILURE_BACKOFF_MAX_S = 600.0

__all__ = [
    "FINAL_FAILURE_REASON",
    "POD_FAILURE_BACKOFF_MAX_S",
    "POD_FAILURE_BACKOFF_S",
    "REFUSED_REASON",
    "JobView",
    "container_restarts",
    "is_deleting",
    "is_ready",
    "is_terminal",
    "job_name",
    "last_finished_at",
    "pod_attempt",
    "pod_completion_index",
    "pod_job_index",
    "pod_phase",
    "pod_rjob",
]


def job_name(jobset: str, rjob: str, index: int) -> str:
    """``<jobset>-<replicatedJob>-<jobIndex>``, as JobSet names its child Jobs."""
    return f"{jobset}-{rjob}-{index}"


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(obj_at(pod, "metadata", "labels"))


def _int_label(pod: dict[str, Any], key: str) -> int:
    try:
        return int(_labels(pod).get(key, "-1"))
    except ValueError:
        return -1


def pod_rjob(pod: dict[str, Any]) -> str:
    return _labels(pod).get(REPLICATED_JOB_NAME_LABEL, "")


def pod_job_index(pod: dict[str, Any]) -> int:
    return _int_label(pod, JOB_INDEX_LABEL)


def pod_attempt(pod: dict[str, Any]) -> int:
    return _int_label(pod, RESTART_ATTEMPT_LABEL)


def pod_completion_index(pod: dict[str, Any]) -> int:
    return _int_label(pod, JOB_COMPLETION_INDEX)


def pod_phase(pod: dict[str, Any]) -> str:
    return str(obj_at(pod, "status").get("phase") or "Pending")


def is_terminal(pod: dict[str, Any]) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def is_deleting(pod: dict[str, Any]) -> bool:
    return bool(obj_at(pod, "metadata").get("deletionTimestamp"))


def is_ready(pod: dict[str, Any]) -> bool:
    for cond in dicts(obj_at(pod, "status").get("conditions")):
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def container_restarts(pod: dict[str, Any]) -> int:
    status = obj_at(pod, "status")
    statuses = [
        *dicts(status.get("initContainerStatuses")),
        *dicts(status.get("containerStatuses")),
    ]
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def last_finished_at(pod: dict[str, Any]) -> str:
    """The latest ``finishedAt`` of the pod's terminated containers ('' when none)."""
    times = [
        str(obj_at(s, "state", "terminated").get("finishedAt") or "")
        for s in dicts(obj_at(pod, "status").get("containerStatuses"))
    ]
    return max(times, default="")


@dataclass
class JobView:
    """One Indexed Job of the current restart attempt, with the status its pods imply."""

    name: str
    rjob: ReplicatedJob
    index: int
    pods: list[dict[str, Any]] = field(default_factory=list)

    @property
    def live_pods(self) -> list[dict[str, Any]]:
        """Pods the Job counts as active: not terminal and not being deleted."""
        return [p for p in self.pods if not is_terminal(p) and not is_deleting(p)]

    @property
    def succeeded_indexes(self) -> set[int]:
        return {pod_completion_index(p) for p in self.pods if pod_phase(p) == "Succeeded"}

    @property
    def succeeded(self) -> int:
        return len(self.succeeded_indexes & set(range(self.rjob.completions)))

    @property
    def failed(self) -> int:
        return sum(1 for p in self.pods if pod_phase(p) == "Failed")

    @property
    def active(self) -> int:
        return len(self.live_pods)

    @property
    def ready(self) -> int:
        return sum(1 for p in self.live_pods if is_ready(p))

    def failure(self) -> tuple[str, str] | None:
        """(reason, message) when the Job has failed, else None.

        The Job controller's two backoff rules: more failed pods than ``backoffLimit``; or, with
        ``restartPolicy: OnFailure``, container restarts of live pods reaching it (any restart
        when the limit is 0).
        """
        for p in self.pods:
            status = obj_at(p, "status")
            reason = status.get("reason")
            if pod_phase(p) == "Failed" and reason in _FINAL_REASONS:
                # The local engine can never run this pod, or it failed for good: retrying
                # cannot help.
                return str(reason), str(status.get("message") or reason)
        limit = self.rjob.backoff_limit
        if self.failed > limit:
            return BACKOFF_LIMIT_EXCEEDED_REASON, BACKOFF_LIMIT_EXCEEDED_MESSAGE
        if self.rjob.restart_policy == "OnFailure":
            restarts = sum(container_restarts(p) for p in self.live_pods)
            if (limit == 0 and restarts > 0) or (limit > 0 and restarts >= limit):
                return BACKOFF_LIMIT_EXCEEDED_REASON, BACKOFF_LIMIT_EXCEEDED_MESSAGE
        return None

    @property
    def complete(self) -> bool:
        return self.failure() is None and self.succeeded >= self.rjob.completions

    @property
    def finished(self) -> bool:
        return self.complete or self.failure() is not None

    def failure_message(self) -> str:
        """The first line of why the earliest failed pod failed: its status message, else
        the termination message of its first failed container ('' when it left none)."""
        failed = sorted((p for p in self.pods if pod_phase(p) == "Failed"), key=last_finished_at)
        for p in failed:
            status = obj_at(p, "status")
            texts = [str(status.get("message") or "")]
            for cs in [
                *dicts(status.get("initContainerStatuses")),
                *dicts(status.get("containerStatuses")),
            ]:
                term = obj_at(cs, "state", "terminated")
                if term.get("exitCode") not in (None, 0):
                    texts.append(str(term.get("message") or ""))
            for text in texts:
                lines = [line for line in text.strip().splitlines() if line.strip()]
                if lines:
                    return lines[-1].strip()
        return ""

    def failure_time(self) -> str:
        return max((last_finished_at(p) for p in self.pods if pod_phase(p) == "Failed"), default="")

    def backoff_left(
        self,
        now: datetime,
        base_s: float = POD_FAILURE_BACKOFF_S,
        max_s: float = POD_FAILURE_BACKOFF_MAX_S,
    ) -> float:
        """Seconds before a pod may start in place of a failed one (0: now): ``base_s`` after
        the last failure, doubling with each failure, at most ``max_s``."""
        if not self.failed:
            return 0.0
        delay = min(base_s * 2.0 ** (self.failed - 1), max_s)
        last = parse_time(self.failure_time()) or now
        return max(0.0, delay - (now - last).total_seconds())
