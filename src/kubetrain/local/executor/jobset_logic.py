"""The JobSet controller and the Job controller, as one pure function.

``reconcile(jobset, pods, now=..., suffix=...)`` looks at a JobSet and every pod that carries its
name, and says what a cluster would do next: which pods to create (with the exact metadata JobSet
and the Job controller give them), which to delete, and the JobSet status that results. No I/O,
no clock, no randomness: the caller injects ``now`` and the pod-name suffixes.

The order of the steps follows JobSet's reconcile loop (v0.12):

1. finished JobSets only clean up (active Jobs' pods go, terminal pods stay);
2. pods of earlier restart attempts are deleted;
3. a failed Job triggers the failure policy (Failed, or a restart of the whole set);
4. enough succeeded Jobs trigger the success policy (Completed);
5. Jobs are created in spec order, subject to dependsOn and startupPolicy InOrder, and each
   Job keeps one pod per completion index (parallelism, backoffLimit, failure back-off);
6. suspend deletes every running pod; resume lets step 5 create them again.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import labels as L
from .conditions import EventSpec, is_true, set_condition
from .jobs import (
    JobView,
    is_deleting,
    is_terminal,
    job_name,
    pod_attempt,
    pod_completion_index,
    pod_job_index,
    pod_rjob,
)
from .podbuild import build_pod
from .spec import JobSetSpec, ReplicatedJob, read_spec

__all__ = ["Decision", "PodDeletion", "Settings", "format_time", "parse_time", "reconcile"]


@dataclass(frozen=True)
class Settings:
    """Knobs a cluster hard-codes; tests shorten the back-off."""

    node_name: str = "kubetrain"
    # The Job controller's pod-failure back-off: 10 s doubling per failure, at most 10 min.
    pod_failure_backoff_s: float = 10.0
    pod_failure_backoff_max_s: float = 600.0


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


def format_time(now: datetime) -> str:
    """RFC 3339 with second precision, as Kubernetes writes metav1.Time."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> datetime | None:
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except (TypeError, ValueError):
            return None


def _first_failed(jobs: list[JobView]) -> JobView:
    # Earliest failure first; spec order breaks ties, as all failures in one pass look equal.
    return min(jobs, key=lambda j: j.failure_time() or "~")


@dataclass
class _Pass:
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


def _deps_reached(rjob: ReplicatedJob, spec: JobSetSpec, statuses: list[dict[str, Any]]) -> bool:
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


def _all_started(rjob: ReplicatedJob, statuses: list[dict[str, Any]]) -> bool:
    st = next(s for s in statuses if s["name"] == rjob.name)
    return bool(st["failed"] + st["ready"] + st["succeeded"] == rjob.replicas)


def _group_pods(
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


def _fail(p: _Pass, reason: str, message: str) -> None:
    p.cond(L.COND_FAILED, "True", reason, message, warning=True)
    p.cond(
        L.COND_RESTARTING,
        "False",
        L.RESTARTING_JOBSET_FAILED_REASON,
        L.RESTARTING_JOBSET_FAILED_MESSAGE,
    )
    p.status["terminalState"] = L.COND_FAILED


def _restart(
    p: _Pass, action_reason: str, action_message: str, cond_reason: str, count: bool
) -> None:
    p.status["restarts"] = p.restarts + 1
    if count:
        p.status["restartsCountTowardsMax"] = int(p.status.get("restartsCountTowardsMax") or 0) + 1
    p.decision.events.append(EventSpec("Warning", action_reason, action_message))
    p.cond(L.COND_RESTARTING, "True", cond_reason, action_message, warning=True)
    # Every Job of the old attempt is deleted with all its pods (foreground deletion).
    for job in p.jobs.values():
        for pod in job.pods:
            p.delete(pod, "JobSetRestart")


def _failure_policy(p: _Pass, failed: list[JobView]) -> None:
    policy = p.spec.failure_policy
    if policy is None:
        first = _first_failed(failed)
        _fail(p, L.FAILED_JOBS_REASON, f"{L.FAILED_JOBS_MESSAGE} (first failed job: {first.name})")
        return
    action, rule_name, first = "RestartJobSet", "", _first_failed(failed)
    for rule in policy.rules:
        matching = [
            j
            for j in failed
            if (
                not rule.on_job_failure_reasons
                or (j.failure() or ("", ""))[0] in rule.on_job_failure_reasons
            )
            and (not rule.target_replicated_jobs or j.rjob.name in rule.target_replicated_jobs)
        ]
        if matching:
            action, rule_name, first = rule.action, rule.name, _first_failed(matching)
            break
    suffix = f" (first failed job: {first.name})"
    cond_reason = f"FailurePolicy_{rule_name}" if rule_name else L.RESTARTING_DEFAULT_POLICY_REASON
    if action == "FailJobSet":
        _fail(p, L.FAIL_JOBSET_ACTION_REASON, L.FAIL_JOBSET_ACTION_MESSAGE + suffix)
    elif action == "RestartJobSetAndIgnoreMaxRestarts":
        _restart(
            p,
            L.RESTART_IGNORE_MAX_ACTION_REASON,
            L.RESTART_IGNORE_MAX_ACTION_MESSAGE + suffix,
            cond_reason,
            False,
        )
    else:
        if action != "RestartJobSet":
            # RestartJob and RestartJobAndIgnoreMaxRestarts sit behind a feature gate that is off
            # by default upstream; restarting the whole set is the closest supported behaviour.
            p.decision.events.append(
                EventSpec(
                    "Warning",
                    "UnsupportedFailurePolicyAction",
                    f"{action} is treated as RestartJobSet",
                )
            )
        if int(p.status.get("restartsCountTowardsMax") or 0) >= policy.max_restarts:
            _fail(p, L.REACHED_MAX_RESTARTS_REASON, L.REACHED_MAX_RESTARTS_MESSAGE + suffix)
        else:
            _restart(
                p,
                L.RESTART_JOBSET_ACTION_REASON,
                L.RESTART_JOBSET_ACTION_MESSAGE + suffix,
                cond_reason,
                True,
            )


def _success_policy(p: _Pass, succeeded: list[JobView]) -> bool:
    targets = p.spec.success_targets

    def wanted(name: str) -> bool:
        return not targets or name in targets

    matched = sum(1 for j in succeeded if wanted(j.rjob.name))
    if p.spec.success_operator == "Any":
        expected = 1
    else:
        expected = sum(r.replicas for r in p.spec.replicated_jobs if wanted(r.name))
    if matched < expected:
        return False
    p.cond(L.COND_COMPLETED, "True", L.ALL_JOBS_COMPLETED_REASON, L.ALL_JOBS_COMPLETED_MESSAGE)
    p.cond(
        L.COND_RESTARTING,
        "False",
        L.RESTARTING_JOBSET_COMPLETED_REASON,
        L.ALL_JOBS_COMPLETED_MESSAGE,
    )
    p.status["terminalState"] = L.COND_COMPLETED
    return True


def _cleanup_finished(p: _Pass) -> None:
    """A finished JobSet deletes its unfinished Jobs; a failed Job's live pods go too."""
    for job in p.jobs.values():
        if job.failure() is not None:
            for pod in job.live_pods:
                p.delete(pod, "JobFailed")
        elif not job.complete:
            for pod in job.pods:
                p.delete(pod, "JobSetFinished")
    for pod in p.previous:
        p.delete(pod, "JobSetRestart")


def _sync_job_pods(p: _Pass, job: JobView, suffix: Callable[[], str]) -> None:
    """The Job controller for one unfinished, unsuspended Indexed Job."""
    rjob = job.rjob
    taken = {pod_completion_index(q) for q in job.pods if not is_terminal(q)}
    taken |= job.succeeded_indexes
    missing = [i for i in range(rjob.completions) if i not in taken]
    capacity = rjob.parallelism - job.active
    if not missing or capacity <= 0:
        return
    if job.failed:
        delay = min(
            p.settings.pod_failure_backoff_s * 2 ** (job.failed - 1),
            p.settings.pod_failure_backoff_max_s,
        )
        last = _parse_or_now(job.failure_time(), p.now)
        wait = delay - (p.now - last).total_seconds()
        if wait > 0:
            cur = p.decision.requeue_after
            p.decision.requeue_after = wait if cur is None else min(cur, wait)
            return
    for index in missing[:capacity]:
        pod = build_pod(
            p.spec, rjob, job.index, index, p.restarts, suffix(), node_name=p.settings.node_name
        )
        job.pods.append(pod)
        p.decision.create.append(pod)


def _parse_or_now(value: str, now: datetime) -> datetime:
    return parse_time(value) or now


def _ttl(p: _Pass) -> None:
    ttl = p.spec.ttl_seconds_after_finished
    if ttl is None:
        return
    finished_at = max(
        (
            str(c.get("lastTransitionTime", ""))
            for c in p.conditions
            if c.get("type") in (L.COND_COMPLETED, L.COND_FAILED) and c.get("status") == "True"
        ),
        default="",
    )
    remaining = ttl - (p.now - _parse_or_now(finished_at, p.now)).total_seconds()
    if remaining <= 0:
        p.decision.delete_jobset = True
    else:
        p.decision.requeue_after = math.ceil(remaining)


def _create_and_suspend(p: _Pass, suffix: Callable[[], str]) -> None:
    spec = p.spec
    blocked_names = {(pod_rjob(q), pod_job_index(q)) for q in p.previous}
    blocking = (
        spec.failure_policy is not None
        and spec.failure_policy.restart_strategy == "BlockingRecreate"
    )
    created = p.created
    in_order_pending = False
    start_statuses = p.rjob_statuses()
    for rjob in spec.replicated_jobs:
        if not _deps_reached(rjob, spec, p.rjob_statuses()):
            continue
        if not spec.suspend and spec.in_order and _all_started(rjob, p.rjob_statuses()):
            continue
        for idx in range(rjob.replicas):
            # A new Job cannot be created while the old one of the same name is being deleted.
            if (rjob.name, idx) in blocked_names or (blocking and p.previous):
                continue
            created.add((rjob.name, idx))
        if not spec.suspend and spec.in_order:
            in_order_pending = True
            p.cond(
                L.COND_STARTUP_IN_PROGRESS,
                "True",
                L.INORDER_IN_PROGRESS_REASON,
                L.INORDER_IN_PROGRESS_MESSAGE,
            )
            break
    if not spec.suspend and spec.in_order and not in_order_pending:
        p.cond(
            L.COND_STARTUP_COMPLETED,
            "True",
            L.INORDER_COMPLETED_REASON,
            L.INORDER_COMPLETED_MESSAGE,
        )

    for key, job in p.jobs.items():
        if spec.suspend:
            # A suspended Job deletes its active pods; finished ones stay.
            for pod in job.live_pods:
                p.delete(pod, "Suspended")
        elif (job.pods or key in created) and not job.finished:
            _sync_job_pods(p, job, suffix)

    if spec.suspend:
        p.cond(L.COND_SUSPENDED, "True", L.SUSPENDED_REASON, L.SUSPENDED_MESSAGE)
        p.cond(
            L.COND_RESTARTING, "False", L.RESTARTING_JOBSET_SUSPENDED_REASON, L.SUSPENDED_MESSAGE
        )
        return
    # Resume: with InOrder, "resumed" is only recorded once no started-but-unready step remains.
    if spec.in_order:
        for rjob in spec.replicated_jobs:
            if not _deps_reached(rjob, spec, start_statuses) or _all_started(rjob, start_statuses):
                continue
            p.cond(
                L.COND_STARTUP_IN_PROGRESS,
                "True",
                L.INORDER_IN_PROGRESS_REASON,
                L.INORDER_IN_PROGRESS_MESSAGE,
            )
            return
    p.cond(L.COND_SUSPENDED, "False", L.RESUMED_REASON, L.RESUMED_MESSAGE)


def _finish_status(p: _Pass, old: dict[str, Any]) -> Decision:
    # JobSet serialises restarts even when 0 (no omitempty on that field).
    p.status.setdefault("restarts", 0)
    p.status["replicatedJobsStatus"] = p.rjob_statuses()
    if not p.status.get("conditions"):
        p.status.pop("conditions", None)
    p.decision.status = p.status
    p.decision.status_changed = p.status != old
    return p.decision


def reconcile(
    jobset: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    now: datetime,
    suffix: Callable[[], str],
    settings: Settings | None = None,
) -> Decision:
    """Decide the next step for ``jobset`` given every pod labelled with its name."""
    spec = read_spec(jobset)
    old = copy.deepcopy(jobset.get("status") or {})
    if spec.managed_elsewhere:
        return Decision(status=old)
    status = copy.deepcopy(old)
    attempt = int(status.get("restarts") or 0)
    jobs, previous = _group_pods(spec, pods, attempt)
    p = _Pass(spec, now, settings or Settings(), status, jobs, previous, Decision(status=status))

    if is_true(p.conditions, L.COND_COMPLETED) or is_true(p.conditions, L.COND_FAILED):
        _cleanup_finished(p)
        _ttl(p)
        return _finish_status(p, old)

    for pod in previous:
        p.delete(pod, "JobSetRestart")

    statuses = p.rjob_statuses()
    ready = sum(s["ready"] + s["succeeded"] for s in statuses)
    if not spec.suspend and ready == spec.total_replicas:
        p.cond(
            L.COND_RESTARTING,
            "False",
            L.RESTARTING_JOBS_READY_REASON,
            L.RESTARTING_JOBS_READY_MESSAGE,
        )

    existing = p.existing()
    failed = [j for j in existing if j.failure() is not None]
    if failed:
        # The Job controller removes a failed Job's live pods whatever JobSet decides.
        for job in failed:
            for pod in job.live_pods:
                p.delete(pod, "JobFailed")
        restarts_before = p.restarts
        _failure_policy(p, failed)
        if p.restarts == restarts_before:
            _cleanup_finished(p)
        return _finish_status(p, old)

    succeeded = [j for j in existing if j.complete]
    if succeeded and _success_policy(p, succeeded):
        _cleanup_finished(p)
        _ttl(p)
        return _finish_status(p, old)

    _create_and_suspend(p, suffix)
    return _finish_status(p, old)
