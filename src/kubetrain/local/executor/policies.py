"""JobSet's failure and success policies, and what a finished JobSet cleans up.

Failure: without a failurePolicy any failed Job fails the set (FailedJobs). With one, the first
rule matching the earliest failed Job decides (FailJobSet, RestartJobSet,
RestartJobSetAndIgnoreMaxRestarts); no match means RestartJobSet, which fails the set with
ReachedMaxRestarts once restartsCountTowardsMax reaches maxRestarts. A restart deletes every pod
of the attempt and bumps ``status.restarts``. Success: operator All (every targeted Job) or Any
(one targeted Job) completes the set (AllJobsCompleted).
"""

from __future__ import annotations

import math

from kubetrain.api.meta import parse_time

from . import labels as L
from .conditions import EventSpec
from .jobs import JobView
from .passes import Pass, first_failed

__all__ = ["apply_failure_policy", "apply_success_policy", "cleanup_finished", "ttl_after_finished"]


def _fail(p: Pass, reason: str, message: str) -> None:
    p.cond(L.COND_FAILED, "True", reason, message, warning=True)
    p.cond(
        L.COND_RESTARTING,
        "False",
        L.RESTARTING_JOBSET_FAILED_REASON,
        L.RESTARTING_JOBSET_FAILED_MESSAGE,
    )
    p.status["terminalState"] = L.COND_FAILED


def _restart(
    p: Pass, action_reason: str, action_message: str, cond_reason: str, count: bool
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


def _first_failed_suffix(job: JobView) -> str:
    # The failed pod's own words (an initializer's "s3://bucket/key: bucket does not exist")
    # ride along, so the TrainJob's Failed condition says why, not only which Job.
    why = job.failure_message()
    return f" (first failed job: {job.name}: {why})" if why else f" (first failed job: {job.name})"


def apply_failure_policy(p: Pass, failed: list[JobView]) -> None:
    policy = p.spec.failure_policy
    if policy is None:
        first = first_failed(failed)
        _fail(p, L.FAILED_JOBS_REASON, L.FAILED_JOBS_MESSAGE + _first_failed_suffix(first))
        return
    action, rule_name, first = "RestartJobSet", "", first_failed(failed)
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
            action, rule_name, first = rule.action, rule.name, first_failed(matching)
            break
    suffix = _first_failed_suffix(first)
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


def apply_success_policy(p: Pass, succeeded: list[JobView]) -> bool:
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


def cleanup_finished(p: Pass) -> None:
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


def ttl_after_finished(p: Pass) -> None:
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
    remaining = ttl - (p.now - (parse_time(finished_at) or p.now)).total_seconds()
    if remaining <= 0:
        p.decision.delete_jobset = True
    else:
        p.decision.requeue_after = math.ceil(remaining)
