"""A tiny in-memory cluster for the pure JobSet logic: pods appear, run and finish on command."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from kubetrain.api.meta import format_time
from kubetrain.local.executor.jobset_logic import Decision, Settings, reconcile

__all__ = ["Sim", "make_jobset", "rjob"]


def rjob(
    name: str,
    *,
    replicas: int = 1,
    pods: int = 1,
    depends_on: list[tuple[str, str]] | None = None,
    restart_policy: str | None = "Never",
    backoff_limit: int | None = 0,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A replicatedJob with ``replicas`` Jobs of ``pods`` pods each (parallelism = completions)."""
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "node", "image": "python", "command": ["true"]}]
    }
    if restart_policy:
        pod_spec["restartPolicy"] = restart_policy
    job_spec: dict[str, Any] = {
        "parallelism": pods,
        "completions": pods,
        "template": {"metadata": {"labels": labels or {}}, "spec": pod_spec},
    }
    if backoff_limit is not None:
        job_spec["backoffLimit"] = backoff_limit
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": job_spec,
        },
    }
    if depends_on:
        out["dependsOn"] = [{"name": n, "status": s} for n, s in depends_on]
    return out


def make_jobset(name: str, *rjobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


class Sim:
    """Applies each Decision at once: created pods start Pending, deleted pods vanish."""

    def __init__(self, jobset: dict[str, Any], settings: Settings | None = None) -> None:
        self.jobset = jobset
        self.pods: dict[str, dict[str, Any]] = {}
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.settings = settings or Settings(pod_failure_backoff_s=0)
        self.counter = itertools.count()
        self.events: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.last: Decision | None = None

    def suffix(self) -> str:
        return f"{next(self.counter):05d}"

    def tick(self, seconds: float = 1) -> None:
        self.now += timedelta(seconds=seconds)

    def step(self, times: int = 3) -> Decision:
        """Reconcile until nothing changes (at most ``times`` passes)."""
        decision = None
        for _ in range(times):
            decision = reconcile(
                self.jobset,
                list(self.pods.values()),
                now=self.now,
                suffix=self.suffix,
                settings=self.settings,
            )
            self.last = decision
            for pod in decision.create:
                pod = copy.deepcopy(pod)
                pod["status"] = {"phase": "Pending"}
                self.pods[pod["metadata"]["name"]] = pod
            for d in decision.delete:
                self.pods.pop(d.name, None)
                self.deleted.append(d.name)
            self.events += [(e.reason, e.message) for e in decision.events]
            self.jobset["status"] = decision.status
            if not (decision.create or decision.delete or decision.status_changed):
                break
        assert decision is not None
        return decision

    # --- what the kubelet would report ----------------------------------------------------
    def select(self, rjob: str | None = None, phase: str | None = None) -> list[dict[str, Any]]:
        out = [
            p
            for p in self.pods.values()
            if (
                rjob is None
                or p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rjob
            )
            and (phase is None or p["status"]["phase"] == phase)
        ]
        return sorted(out, key=lambda p: p["metadata"]["name"])

    def run(self, rjob: str | None = None) -> None:
        for p in self.select(rjob, "Pending"):
            p["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [
                    {"name": "node", "restartCount": 0, "state": {"running": {}}}
                ],
            }

    def finish(self, rjob: str | None = None, exit_code: int = 0, only: int | None = None) -> None:
        pods = self.select(rjob, "Running")
        if only is not None:
            pods = [
                p
                for p in pods
                if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == str(only)
            ]
        for p in pods:
            p["status"] = {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    {
                        "name": "node",
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": exit_code,
                                "finishedAt": format_time(self.now),
                            }
                        },
                    }
                ],
            }

    def run_to_exit(
        self, rjob: str | None = None, exit_code: int = 0, only: int | None = None, passes: int = 3
    ) -> Decision:
        """Every pending pod runs; then `finish` ends the running pods it picks, and the JobSet
        is reconciled (`step`)."""
        self.run()
        self.finish(rjob, exit_code, only)
        return self.step(passes)

    def crash_in_place(self, rjob: str | None = None) -> None:
        """restartPolicy OnFailure: the kubelet restarts the container and counts it."""
        for p in self.select(rjob, "Running"):
            p["status"]["containerStatuses"][0]["restartCount"] += 1

    # --- what tests read --------------------------------------------------------------------
    def condition(self, ctype: str) -> dict[str, Any] | None:
        return next(
            (c for c in self.jobset["status"].get("conditions", []) if c["type"] == ctype), None
        )

    def true_conditions(self) -> list[str]:
        return [
            c["type"] for c in self.jobset["status"].get("conditions", []) if c["status"] == "True"
        ]

    def rjob_status(self, name: str) -> dict[str, Any]:
        return next(s for s in self.jobset["status"]["replicatedJobsStatus"] if s["name"] == name)
