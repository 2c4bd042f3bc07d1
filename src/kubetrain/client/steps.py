"""A TrainJob's steps from its pods, named the way the official SDK names them.

``dataset-initializer`` and ``model-initializer`` are their replicated jobs' pods; trainer pods are
``node-<completion index>``. An MPI launcher is ``node-0`` and the worker indices shift by one, so
``node-0`` is always where rank 0's output is. Only the newest pod per step is the step (a JobSet
restart leaves older pods behind for a while); :func:`pod_summary` describes any pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api import labels as L
from kubetrain.api.access import dicts, obj_at

__all__ = [
    "STEP_JOBS",
    "Step",
    "pod_selector",
    "pod_summary",
    "steps_from_pods",
]

# Replicated jobs whose pods are steps, and the container that holds each one's output.
STEP_JOBS: dict[str, str] = {
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
    "launcher": "node",
    "node": "node",
}


def pod_selector(job: str) -> dict[str, Any]:
    """Label selector (key: value) of a TrainJob's pods (JobSet names its JobSet after the job)."""
    return {L.JOBSET_NAME_LABEL: job}


@dataclass(frozen=True, slots=True)
class Step:
    """One step: a pod, its phase, and what its step container did."""

    name: str
    pod: str
    container: str
    phase: str
    restarts: int
    exit_code: int | None
    reason: str
    replicated_job: str
    index: int | None
    created: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pod": self.pod,
            "container": self.container,
            "phase": self.phase,
            "restarts": self.restarts,
            "exitCode": self.exit_code,
            "reason": self.reason,
        }


def _index(pod: dict[str, Any]) -> int | None:
    raw = obj_at(pod, "metadata", "labels").get(L.JOB_COMPLETION_INDEX)
    if raw is None:
        raw = obj_at(pod, "metadata", "annotations").get(L.JOB_COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def pod_summary(pod: dict[str, Any], container: str | None = None) -> tuple[int, int | None, str]:
    """(restarts, exit code, reason) of ``container`` (default: the pod's first container).

    The exit code is the current termination if the container has ended, else the last one, so a
    restarted container still shows why it restarted.
    """
    status = obj_at(pod, "status")
    statuses = dicts(status.get("containerStatuses"))
    chosen = next((s for s in statuses if s.get("name") == container), None)
    if chosen is None and statuses:
        chosen = statuses[0]
    if chosen is None:
        return 0, None, str(status.get("reason") or "")
    restarts = int(chosen.get("restartCount") or 0)
    for key in ("state", "lastState"):
        term = obj_at(chosen, key).get("terminated")
        if term:
            return restarts, term.get("exitCode"), str(term.get("reason") or "")
    waiting = obj_at(chosen, "state", "waiting")
    return restarts, None, str(waiting.get("reason") or status.get("reason") or "")


def _step_of(pod: dict[str, Any], has_launcher: bool) -> tuple[str, str] | None:
    labels = obj_at(pod, "metadata", "labels")
    rjob = labels.get(L.REPLICATED_JOB_NAME_LABEL)
    if rjob not in STEP_JOBS:
        return None
    if rjob in ("dataset-initializer", "model-initializer"):
        return rjob, STEP_JOBS[rjob]
    index = _index(pod) or 0
    if rjob == "launcher":
        return "node-0", "node"
    return f"node-{index + 1 if has_launcher else index}", "node"


def _step_sort_key(step: Step) -> tuple[int, int, str]:
    order = {"dataset-initializer": 0, "model-initializer": 1}
    if step.name in order:
        return order[step.name], 0, step.name
    return 2, int(step.name.rpartition("-")[2]), step.name


def steps_from_pods(pods: list[dict[str, Any]]) -> list[Step]:
    """The job's steps, initializers first then ``node-0..N``; newest pod wins per step."""
    has_launcher = any(
        obj_at(p, "metadata", "labels").get(L.REPLICATED_JOB_NAME_LABEL) == "launcher" for p in pods
    )
    newest: dict[str, Step] = {}
    for pod in sorted(
        pods, key=lambda p: str(obj_at(p, "metadata").get("creationTimestamp") or "")
    ):
        where = _step_of(pod, has_launcher)
        if where is None:
            continue
        name, container = where
        restarts, exit_code, reason = pod_summary(pod, container)
        labels = obj_at(pod, "metadata", "labels")
        newest[name] = Step(
            name=name,
            pod=str(obj_at(pod, "metadata").get("name", "")),
            container=container,
            phase=str(obj_at(pod, "status").get("phase") or "Pending"),
            restarts=restarts,
            exit_code=exit_code,
            reason=reason,
            replicated_job=str(labels.get(L.REPLICATED_JOB_NAME_LABEL, "")),
            index=_index(pod),
            created=str(obj_at(pod, "metadata").get("creationTimestamp") or ""),
        )
    return sorted(newest.values(), key=_step_sort_key)
