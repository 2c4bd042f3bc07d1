"""One reconcile pass in progress: the JobSet's defaulted spec, its status being rewritten,
the virtual Jobs of the current restart attempt with their pods, and the decision so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.meta import format_time

from .conditions import set_condition
from .decision import Decision, PodDeletion, Settings
from .jobs import (
    JobView,
    is_deleting,
    job_name,
    pod_attempt,
    pod_completion_index,
    pod_job_index,
    pod_rjob,
)
from .spec import JobSetSpec, ReplicatedJob

__all__ = ["Pass", "all_started", "deps_reached", "first_failed", "group_pods"]


def first_failed(jobs: list[JobView]) -> JobView:
    # Earliest failure first; spec order breaks ties, as all failures in one pass look equal.
    return min(jobs, key=lambda j: j.failure_time() or "~")


@dataclass
class Pass:
    """The state of one reconcile while it runs."""

    spec: JobSetSpec
    now: datetime
    settings: Settings
    status: dict[str, Any]
    jobs: dict[tuple[str, int], JobView]
    previous: list[dict[str, Any]]
    decision: Decision
    # Jobs created in this pass: they exist (and count in the status) even without pods.
    created: set[tuple[str, int]] = field(default_factory=set)

    @property
    def conditions(self) -> list[dict[str, Any]]:
        conds: list[dict[str, Any]] = self.status.setdefault("conditions", [])
        return conds

    @property
    def restarts(self) -> int:
        return int(self.status.get("restarts") or 0)

    def cond(
        self, ctype: str, status: str, reason: str, message: str, *, warning: bool = False
    ) -> None:
        event = set_condition(
            self.conditions,
            ctype,
            status,
            reason,
            message,
            now=format_time(self.now),
            warning=warning,
        )
        if event is not None:
            self.decision.events.append(event)

    def delete(self, pod: dict[str, Any], reason: str) -> None:
        name = str(pod["metadata"]["name"])
        if is_deleting(pod) or any(d.name == name for d in self.decision.delete):
            return
        self.decision.delete.append(PodDeletion(name, reason))

    def existing(self) -> list[JobView]:
        """Jobs that exist: the ones with pods of this attempt, plus those created this pass."""
        return [j for j in self.jobs.values() if j.pods]

    def rjob_statuses(self) -> list[dict[str, Any]]:
        created = self.created
        out = []
        for rjob in self.spec.replicated_jobs:
            counts = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
            for idx in range(rjob.replicas):
                job = self.jobs[(rjob.name, idx)]
                if not job.pods and (rjob.name, idx) not in created:
                    continue
                if job.failure() is not None:
                    counts["failed"] += 1
                elif job.complete:
                    counts["succeeded"] += 1
                else:
                    if job.succeeded + job.ready >= min(rjob.parallelism, rjob.completions):
                        counts["ready"] += 1
                    if job.active > 0:
                        counts["active"] += 1
                    if self.spec.suspend:
                        counts["suspended"] += 1
            out.append({"name": rjob.name, **counts})
        return out


def deps_reached(rjob: ReplicatedJob, spec: JobSetSpec, statuses: list[dict[str, Any]]) -> bool:
    by_name = {s["name"]: s for s in statuses}
    for dep, want in rjob.depends_on:
        dep_rjob = spec.rjob(dep)
        st = by_name.get(dep)
        if dep_rjob is None or st is None:
            return False
        if want == "Complete" and st["succeeded"] != dep_rjob.replicas:
            return False
        if want == "Ready" and st["failed"] + st["ready"] + st["succeeded"] != dep_rjob.replicas:
            return False
    return True


def all_started(rjob: ReplicatedJob, statuses: list[dict[str, Any]]) -> bool:
    st = next(s for s in statuses if s["name"] == rjob.name)
    return bool(st["failed"] + st["ready"] + st["succeeded"] == rjob.replicas)


def group_pods(
    spec: JobSetSpec, pods: list[dict[str, Any]], attempt: int
) -> tuple[dict[tuple[str, int], JobView], list[dict[str, Any]]]:
    jobs = {
        (r.name, i): JobView(job_name(spec.name, r.name, i), r, i)
        for r in spec.replicated_jobs
        for i in range(r.replicas)
    }
    previous: list[dict[str, Any]] = []
    for pod in pods:
        key = (pod_rjob(pod), pod_job_index(pod))
        job = jobs.get(key)
        in_range = job is not None and 0 <= pod_completion_index(pod) < job.rjob.completions
        if pod_attempt(pod) == attempt and job is not None and in_range:
            job.pods.append(pod)
        else:
            # Earlier attempts, and pods the current spec no longer describes.
            previous.append(pod)
    return jobs, previous
