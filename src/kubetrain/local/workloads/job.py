"""batch/v1 Jobs: run pods until enough succeed, or fail by the backoff limit or the deadline.

The Job semantics are the executor's (`executor.jobs.JobView`: which pods count as active,
succeeded and failed, and when a Job has failed by its backoff limit), the same rules the
JobSet executor applies to its virtual Jobs; `job_decision` adds what a stored Job has besides
(NonIndexed completions, suspension, the active deadline, the status fields and conditions) and
`JobController` writes the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubetrain.api.access import as_dict, as_list, dicts, list_at, obj_at
from kubetrain.api.labels import JOB_COMPLETION_INDEX, JOB_NAME_LABEL
from kubetrain.api.meta import find_condition, format_time, parse_time
from kubetrain.api.types import Obj
from kubetrain.kube.kinds import JOB, POD
from kubetrain.local.executor.jobs import JobView, is_terminal, pod_completion_index, pod_phase
from kubetrain.local.executor.labels import CONTROLLER_UID, CONTROLLER_UID_LEGACY, JOB_NAME_LEGACY
from kubetrain.local.executor.spec import DEFAULT_BACKOFF_LIMIT, ReplicatedJob

from .loop import Controller, Key
from .pods import is_active, owned_by, pod_from_template

__all__ = ["JobController", "JobDecision", "job_decision", "job_pod"]

DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"


@dataclass(frozen=True)
class JobDecision:
    # One entry per pod to create: its completion index (None in NonIndexed mode).
    create: list[int | None] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    status: Obj = field(default_factory=dict)
    # Seconds until the Job must be looked at again without any change (deadline, TTL).
    again: float | None = None
    # The Job has finished and its TTL after finishing has run out: delete it.
    expired: bool = False


def _view(job: Obj, pods: list[Obj]) -> JobView:
    spec = obj_at(job, "spec")
    template = obj_at(spec, "template")
    completions = spec.get("completions")
    rjob = ReplicatedJob(
        name=str(job["metadata"]["name"]),
        group="",
        replicas=1,
        parallelism=int(1 if spec.get("parallelism") is None else spec["parallelism"]),
        completions=int(1 if completions is None else completions),
        backoff_limit=int(
            DEFAULT_BACKOFF_LIMIT if spec.get("backoffLimit") is None else spec["backoffLimit"]
        ),
        restart_policy=str(obj_at(template, "spec").get("restartPolicy") or "Never"),
        depends_on=(),
        pod_template=template,
    )
    return JobView(rjob.name, rjob, 0, pods)


def _indexes_text(indexes: set[int]) -> str:
    """``completedIndexes``: ``0-2,5`` (ranges of consecutive indexes)."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _condition(old: list[object], type_: str, reason: str, message: str, now: str) -> Obj:
    prev = find_condition(old, type_)
    same = prev is not None and prev.get("status") == "True"
    return {
        "type": type_, "status": "True",
        "lastProbeTime": str(prev.get("lastProbeTime")) if same and prev else now,
        "lastTransitionTime": str(prev.get("lastTransitionTime")) if same and prev else now,
        "reason": reason, "message": message,
    }  # fmt: skip


def job_decision(job: Obj, pods: list[Obj], now: datetime) -> JobDecision:
    """What the Job controller does next for ``job`` and its pods, and the status it reports."""
    spec = obj_at(job, "spec")
    old = obj_at(job, "status")
    old_conds = as_list(old.get("conditions"))
    stamp = format_time(now)
    view = _view(job, pods)
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions")
    succeeded_pods = [p for p in pods if pod_phase(p) == "Succeeded"]
    succeeded = view.succeeded if indexed else len(succeeded_pods)
    active = [p for p in pods if is_active(p)]
    finished = any(
        as_dict(c).get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in old_conds
    )
    status: Obj = {}
    conditions: list[Obj] = [c for c in old_conds if as_dict(c).get("type") != "Suspended"]
    create: list[int | None] = []
    delete: list[Obj] = []
    again: float | None = None
    started = parse_time(old.get("startTime"))
    if spec.get("suspend") and not finished:
        delete = active
        conditions.append(
            _condition(old_conds, "Suspended", "JobSuspended", "Job suspended", stamp)
        )
    elif not finished:
        if started is None:
            started = now
        failure = view.failure()
        deadline = spec.get("activeDeadlineSeconds")
        if failure is None and deadline is not None:
            left = (started + timedelta(seconds=int(deadline)) - now).total_seconds()
            if left <= 0:
                failure = (DEADLINE_REASON, DEADLINE_MESSAGE)
            else:
                again = left
        if completions is None:
            # A work queue: done once any pod has succeeded and none is still running.
            complete = bool(succeeded_pods) and not active
        else:
            complete = succeeded >= int(completions)
        if failure is not None:
            delete = active
            conditions.append(_condition(old_conds, "FailureTarget", *failure, stamp))
            conditions.append(_condition(old_conds, "Failed", *failure, stamp))
        elif complete:
            delete = active
            conditions.append(_condition(old_conds, "SuccessCriteriaMet", "CompletionsReached",
                                         "Reached expected number of succeeded pods", stamp))  # fmt: skip
            conditions.append(_condition(old_conds, "Complete", "CompletionsReached",
                                         "Reached expected number of succeeded pods", stamp))  # fmt: skip
            status["completionTime"] = stamp
        elif (wait := view.backoff_left(now)) > 0:
            # A failed pod is replaced only after the Job controller's back-off.
            again = wait if again is None else min(again, wait)
        else:
            parallelism = view.rjob.parallelism
            if indexed:
                busy = {pod_completion_index(p) for p in active} | view.succeeded_indexes
                free = [i for i in range(int(completions or 0)) if i not in busy]
                create = list(free[: max(parallelism - len(active), 0)])
            else:
                if completions is None:  # a work queue: no new pod once one has succeeded
                    wanted = 0 if succeeded_pods else parallelism
                else:
                    wanted = min(parallelism, int(completions) - succeeded)
                create = [None] * max(wanted - len(active), 0)
    if started is not None:
        status["startTime"] = format_time(started)
    if old.get("completionTime"):
        status["completionTime"] = old["completionTime"]
    status.update({
        "active": len(active) - len(delete) + len(create),
        "ready": sum(1 for p in active if p not in delete and _ready(p)),
        "succeeded": succeeded,
        "failed": view.failed,
    })  # fmt: skip
    status = {k: v for k, v in status.items() if v or k == "ready"}
    if indexed and view.succeeded_indexes:
        status["completedIndexes"] = _indexes_text(view.succeeded_indexes)
    status["uncountedTerminatedPods"] = {}
    if conditions:
        status["conditions"] = conditions
    expired = False
    ttl = spec.get("ttlSecondsAfterFinished")
    ended = parse_time(status.get("completionTime")) or _finished_at(conditions)
    if (
        ttl is not None
        and ended is not None
        and any(c["type"] in ("Complete", "Failed") for c in conditions)
    ):
        left = (ended + timedelta(seconds=int(ttl)) - now).total_seconds()
        expired = left <= 0
        again = None if expired else left
    return JobDecision(create, delete, status, again, expired)


def _ready(pod: Obj) -> bool:
    cond = find_condition(obj_at(pod, "status").get("conditions"), "Ready")
    return cond is not None and cond.get("status") == "True" and not is_terminal(pod)


def _finished_at(conditions: list[Obj]) -> datetime | None:
    for cond in conditions:
        if cond.get("type") in ("Complete", "Failed"):
            return parse_time(cond.get("lastTransitionTime"))
    return None


def job_pod(job: Obj, index: int | None) -> Obj:
    """A pod of the Job: labelled as the Job controller labels its pods; an Indexed Job's pod
    carries its completion index (label, annotation, ``JOB_COMPLETION_INDEX``) and hostname."""
    meta = job["metadata"]
    name, uid = str(meta["name"]), str(meta["uid"])
    labels = {
        CONTROLLER_UID: uid,
        JOB_NAME_LABEL: name,
        CONTROLLER_UID_LEGACY: uid,
        JOB_NAME_LEGACY: name,
    }
    template = obj_at(job, "spec", "template")
    pod = pod_from_template(job, template, labels=labels)
    if index is not None:
        pod["metadata"]["generateName"] = f"{name}-{index}-"
        pod["metadata"]["labels"][JOB_COMPLETION_INDEX] = str(index)
        pod["metadata"].setdefault("annotations", {})[JOB_COMPLETION_INDEX] = str(index)
        pod["spec"].setdefault("hostname", f"{name}-{index}")
        env = {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {"fieldPath": f"metadata.annotations['{JOB_COMPLETION_INDEX}']"}
            },
        }
        for container in [
            *as_list(pod["spec"].get("initContainers")),
            *as_list(pod["spec"].get("containers")),
        ]:
            container["env"] = [*as_list(container.get("env")), env]
    return pod


class JobController(Controller):
    kind = JOB
    watches = (JOB, POD)
    component = "job-controller"

    async def reconcile(self, key: Key) -> float | None:
        job = self.get(key)
        if job is None or obj_at(job, "metadata").get("deletionTimestamp"):
            return None
        pods = owned_by(job, self.cached(POD, key[0]))
        decision = job_decision(job, pods, self.shared.clock())
        if decision.expired:
            await self.client.delete(JOB.api_version, JOB.plural, key[1], namespace=key[0],
                                     propagation_policy="Background", uid=job["metadata"]["uid"])  # fmt: skip
            return None
        for index in decision.create:
            created = await self.create(POD, job_pod(job, index))
            self.event(
                job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )
        for pod in decision.delete:
            await self.delete(POD, pod)
            self.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")
        was = {c.get("type") for c in list_at(job, "status", "conditions")}
        for cond in dicts(decision.status.get("conditions")):
            if cond["type"] in ("Complete", "Failed") and cond["type"] not in was:
                kind = "Normal" if cond["type"] == "Complete" else "Warning"
                reason = "Completed" if cond["type"] == "Complete" else str(cond["reason"])
                self.event(
                    job, kind, reason, "Job completed" if kind == "Normal" else cond["message"]
                )
        await self.write_status(job, decision.status)
        return decision.again
