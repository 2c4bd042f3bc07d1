"""A JobSet spec read once, with the defaults JobSet's webhook and the Job API would write.

The embedded API server stores the JobSet as the controller applied it; on a cluster JobSet's
mutating webhook and the batch/v1 defaults fill the gaps first. The executor applies the same
defaults when it reads the object instead of writing them back, so the stored JobSet stays
byte-for-byte what the controller applied.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at
from kubetrain.api.labels import JOBSET_CONTROLLER

__all__ = ["FailurePolicy", "FailureRule", "JobSetSpec", "ReplicatedJob", "read_spec"]

# batch/v1 Job.spec.backoffLimit default.
DEFAULT_BACKOFF_LIMIT = 6


@dataclass(frozen=True)
class ReplicatedJob:
    """One entry of spec.replicatedJobs: ``replicas`` Indexed Jobs of ``completions`` pods."""

    name: str
    group: str
    replicas: int
    parallelism: int
    completions: int
    backoff_limit: int
    restart_policy: str
    # (replicatedJob name, "Ready" | "Complete"), in spec order.
    depends_on: tuple[tuple[str, str], ...]
    pod_template: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class FailureRule:
    name: str
    action: str
    on_job_failure_reasons: tuple[str, ...]
    target_replicated_jobs: tuple[str, ...]


@dataclass(frozen=True)
class FailurePolicy:
    max_restarts: int
    restart_strategy: str
    rules: tuple[FailureRule, ...]


@dataclass(frozen=True)
class JobSetSpec:
    name: str
    namespace: str
    uid: str
    replicated_jobs: tuple[ReplicatedJob, ...]
    suspend: bool
    dns_hostnames: bool
    subdomain: str
    success_operator: str
    success_targets: tuple[str, ...]
    failure_policy: FailurePolicy | None
    in_order: bool
    # Another controller (spec.managedBy) owns this JobSet: the executor must not touch it.
    managed_elsewhere: bool
    # (template name, claim name) for every volumeClaimPolicies template.
    claim_templates: tuple[tuple[str, str], ...]
    ttl_seconds_after_finished: int | None
    # spec.coordinator as the pod endpoint it names, or None.
    coordinator: str | None = None

    def rjob(self, name: str) -> ReplicatedJob | None:
        return next((r for r in self.replicated_jobs if r.name == name), None)

    @property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.replicated_jobs)


def _int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _rjob(raw: dict[str, Any]) -> ReplicatedJob:
    job_spec = obj_at(raw, "template", "spec")
    parallelism = _int(job_spec.get("parallelism"), 1)
    # Indexed Jobs must name completions; parallelism stands in when a template omits it.
    completions = _int(job_spec.get("completions"), parallelism)
    pod_template = copy.deepcopy(obj_at(job_spec, "template"))
    pod_spec = pod_template.setdefault("spec", {})
    # JobSet's webhook defaults restartPolicy to OnFailure (Jobs refuse Always).
    restart_policy = pod_spec.get("restartPolicy") or "OnFailure"
    pod_spec["restartPolicy"] = restart_policy
    return ReplicatedJob(
        name=str(raw.get("name", "")),
        group=str(raw.get("groupName") or "default"),
        replicas=_int(raw.get("replicas"), 1),
        parallelism=parallelism,
        completions=completions,
        backoff_limit=_int(job_spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT),
        restart_policy=restart_policy,
        depends_on=tuple(
            (str(d.get("name", "")), str(d.get("status", "Complete")))
            for d in dicts(raw.get("dependsOn"))
        ),
        pod_template=pod_template,
    )


def _failure_policy(raw: dict[str, Any] | None) -> FailurePolicy | None:
    if raw is None:
        return None
    rules = tuple(
        FailureRule(
            # JobSet's webhook names unnamed rules after their position.
            name=str(r.get("name") or f"failurePolicyRule{i}"),
            action=str(r.get("action", "RestartJobSet")),
            on_job_failure_reasons=tuple(as_list(r.get("onJobFailureReasons"))),
            target_replicated_jobs=tuple(as_list(r.get("targetReplicatedJobs"))),
        )
        # Positions count every entry, as the webhook's do.
        for i, r in enumerate(as_list(raw.get("rules")))
    )
    return FailurePolicy(
        max_restarts=_int(raw.get("maxRestarts"), 0),
        restart_strategy=str(raw.get("restartStrategy") or "Recreate"),
        rules=rules,
    )


def read_spec(jobset: dict[str, Any]) -> JobSetSpec:
    """The defaulted view of ``jobset`` (a JobSet object as the API server returns it)."""
    meta = obj_at(jobset, "metadata")
    spec = obj_at(jobset, "spec")
    network = obj_at(spec, "network")
    success = obj_at(spec, "successPolicy")
    startup = obj_at(spec, "startupPolicy")
    name = str(meta.get("name", ""))
    manager = spec.get("managedBy")
    claims: list[tuple[str, str]] = []
    for policy in dicts(spec.get("volumeClaimPolicies")):
        for template in dicts(policy.get("templates")):
            tname = str(obj_at(template, "metadata").get("name", ""))
            claims.append((tname, f"{tname}-{name}"))
    ttl = spec.get("ttlSecondsAfterFinished")
    coord = spec.get("coordinator")
    subdomain = str(network.get("subdomain") or name)
    coordinator = (
        f"{name}-{coord.get('replicatedJob', '')}-{int(coord.get('jobIndex') or 0)}"
        f"-{int(coord.get('podIndex') or 0)}.{subdomain}"
        if isinstance(coord, dict)
        else None
    )
    return JobSetSpec(
        name=name,
        namespace=str(meta.get("namespace") or "default"),
        uid=str(meta.get("uid", "")),
        replicated_jobs=tuple(_rjob(r) for r in dicts(spec.get("replicatedJobs"))),
        suspend=bool(spec.get("suspend", False)),
        dns_hostnames=network.get("enableDNSHostnames") is not False,
        subdomain=subdomain,
        success_operator=str(success.get("operator") or "All"),
        success_targets=tuple(as_list(success.get("targetReplicatedJobs"))),
        failure_policy=_failure_policy(spec.get("failurePolicy")),
        in_order=startup.get("startupPolicyOrder") == "InOrder",
        managed_elsewhere=bool(manager) and manager != JOBSET_CONTROLLER,
        claim_templates=tuple(claims),
        ttl_seconds_after_finished=_int(ttl, 0) if ttl is not None else None,
        coordinator=coordinator,
    )
