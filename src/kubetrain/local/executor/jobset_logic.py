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
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.meta import condition_true, format_time

from . import labels as L
from .conditions import set_condition
from .decision import Decision, PodDeletion, Settings
from .jobs import JobView, is_terminal, pod_completion_index, pod_job_index, pod_rjob
from .passes import Pass, all_started, deps_reached, group_pods
from .podbuild import build_pod
from .policies import (
    apply_failure_policy,
    apply_success_policy,
    cleanup_finished,
    ttl_after_finished,
)
from .spec import read_spec

__all__ = [
    "CREATE_FAILED_REASON",
    "Decision",
    "PodDeletion",
    "Settings",
    "creation_failed",
    "reconcile",
]

# A pod the API server refuses outright (invalid, forbidden) would be refused again on every
# retry: the JobSet fails with this reason instead of waiting forever without a condition.
CREATE_FAILED_REASON = "PodCreationFailed"


def _sync_job_pods(p: Pass, job: JobView, suffix: Callable[[], str]) -> None:
    """The Job controller for one unfinished, unsuspended Indexed Job."""
    rjob = job.rjob
    taken = {pod_completion_index(q) for q in job.pods if not is_terminal(q)}
    taken |= job.succeeded_indexes
    missing = [i for i in range(rjob.completions) if i not in taken]
    capacity = rjob.parallelism - job.active
    if not missing or capacity <= 0:
        return
    wait = job.backoff_left(
        p.now, p.settings.pod_failure_backoff_s, p.settings.pod_failure_backoff_max_s
    )
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


def _create_and_suspend(p: Pass, suffix: Callable[[], str]) -> None:
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
        if not deps_reached(rjob, spec, p.rjob_statuses()):
            continue
        if not spec.suspend and spec.in_order and all_started(rjob, p.rjob_statuses()):
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
            if not deps_reached(rjob, spec, start_statuses) or all_started(rjob, start_statuses):
                continue
            p.cond(
                L.COND_STARTUP_IN_PROGRESS,
                "True",
                L.INORDER_IN_PROGRESS_REASON,
                L.INORDER_IN_PROGRESS_MESSAGE,
            )
            return
    p.cond(L.COND_SUSPENDED, "False", L.RESUMED_REASON, L.RESUMED_MESSAGE)


def _finish_status(p: Pass, old: dict[str, Any]) -> Decision:
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
    old = copy.deepcopy(obj_at(jobset, "status"))
    if spec.managed_elsewhere:
        return Decision(status=old)
    status = copy.deepcopy(old)
    attempt = int(status.get("restarts") or 0)
    jobs, previous = group_pods(spec, pods, attempt)
    p = Pass(spec, now, settings or Settings(), status, jobs, previous, Decision(status=status))

    if any(condition_true(p.conditions, t) for t in (L.COND_COMPLETED, L.COND_FAILED)):
        cleanup_finished(p)
        ttl_after_finished(p)
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
        apply_failure_policy(p, failed)
        if p.restarts == restarts_before:
            cleanup_finished(p)
        return _finish_status(p, old)

    succeeded = [j for j in existing if j.complete]
    if succeeded and apply_success_policy(p, succeeded):
        cleanup_finished(p)
        ttl_after_finished(p)
        return _finish_status(p, old)

    _create_and_suspend(p, suffix)
    return _finish_status(p, old)


def creation_failed(jobset: dict[str, Any], message: str, *, now: datetime) -> dict[str, Any]:
    """The JobSet status once one of its pods was refused by the API server for good."""
    status = copy.deepcopy(obj_at(jobset, "status"))
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    stamp = format_time(now)
    set_condition(
        conditions, L.COND_FAILED, "True", CREATE_FAILED_REASON, message, now=stamp, warning=True
    )
    status["terminalState"] = L.COND_FAILED
    status.setdefault("restarts", 0)
    return status
