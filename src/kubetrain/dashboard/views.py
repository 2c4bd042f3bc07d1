"""What each page asks for, gathered from :mod:`kubetrain.client` (blocking; run in a thread).

Only assembly lives here: every state, step, pod summary, event row and metric series comes from
the client functions the CLI prints, so the page and ``kubetrain describe`` never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kubetrain.api.access import dicts, list_at, obj_at
from kubetrain.client import resources as R
from kubetrain.client.jobs import ALL_NAMESPACES, JobClient
from kubetrain.client.metrics import series_columns
from kubetrain.client.present import event_rows, pod_row, runtime_row
from kubetrain.client.tuning import objective_series, parameter_rows, trial_details
from kubetrain.dashboard.hub import experiment_summary, job_row

__all__ = ["experiment_detail", "in_namespace", "job_detail", "job_metrics", "runtimes"]

_POD_COLUMNS = ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "EXIT CODE", "IP"]
_EVENT_COLUMNS = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]


def in_namespace(jc: JobClient, namespace: str) -> JobClient:
    """The same connection aimed at ``namespace`` (helpers such as ``follow_step`` use the
    client's namespace). Shares the HTTP client: never close the result."""
    return JobClient(dataclasses.replace(jc.conn, namespace=namespace))


def _yaml(obj: dict[str, Any] | None) -> str:
    from kubetrain.api.dump import dump_yaml

    if obj is None:
        return ""
    meta = {k: v for k, v in obj_at(obj, "metadata").items() if k != "managedFields"}
    return dump_yaml({**obj, "metadata": meta})


def _runtime_of(jc: JobClient, obj: dict[str, Any], namespace: str) -> dict[str, Any] | None:
    ref = obj_at(obj, "spec", "runtimeRef")
    info = (
        R.TRAINING_RUNTIME
        if ref.get("kind") == R.TRAINING_RUNTIME.kind
        else R.CLUSTER_TRAINING_RUNTIME
    )
    return jc.find(info, str(ref.get("name") or ""), namespace) if ref.get("name") else None


def job_detail(jc: JobClient, namespace: str, name: str, *, events: bool = False) -> dict[str, Any]:
    """Everything the job page shows; NotFoundError (a ClientError) when the job is gone.

    Events only when asked (the Events tab): listing them reads every Event of the namespace,
    which with thousands of jobs costs more than all the rest together.
    """
    obj = jc.get(R.TRAINJOB, name, namespace)
    pods = jc.pods(name, namespace)
    view = jc.view(obj, pods)
    runtime = _runtime_of(jc, obj, namespace)
    jobset = jc.find(R.JOBSET, name, namespace)
    return {
        "row": job_row(view),
        "message": view.message,
        "suspended": view.suspended,
        "conditions": view.conditions,
        "trainerStatus": view.progress,
        "steps": [s.as_dict() for s in view.steps],
        "pods": [dict(zip(_POD_COLUMNS, pod_row(p, wide=True), strict=True)) for p in pods],
        "events": [
            dict(zip(_EVENT_COLUMNS, r, strict=True))
            for r in (event_rows(jc.events(name, namespace)) if events else [])
        ],
        "yaml": {
            "trainjob": _yaml(obj),
            "runtime": _yaml(runtime),
            "runtimeName": f"{view.runtime_kind}/{view.runtime_name}",
            # What the controller applied from its render, as the API server holds it now.
            "rendered": _yaml(jobset),
        },
    }


def job_metrics(jc: JobClient, namespace: str, name: str, after: float = 0.0) -> dict[str, Any]:
    """The metric series in columns (x = seconds since the epoch the report was received), only
    points received after ``after``; numeric metrics only."""
    series, columns = series_columns(jc, name, namespace, after=after or None)
    return {
        "x": columns.x,
        # A cluster's single point (latest only) has no receive time; the page tells reports
        # apart by the time the training code sent them.
        "updated": [series.job_updated] if series.latest_only else [],
        "progress": columns.progress,
        "metrics": columns.metrics,
        "latestOnly": series.latest_only,
    }


def _setup(obj: dict[str, Any]) -> dict[str, Any]:
    """What a runtime sets up: its ML policy and, per replicated job, size, image and command."""
    spec = obj_at(obj, "spec")
    jobs = []
    for rjob in dicts(obj_at(spec, "template", "spec").get("replicatedJobs")):
        pod = obj_at(rjob, "template", "spec", "template", "spec")
        for c in dicts(pod.get("containers")):
            jobs.append(
                {
                    "job": rjob.get("name"),
                    "replicas": rjob.get("replicas", 1),
                    "container": c.get("name"),
                    "image": c.get("image") or "",
                    "command": " ".join(
                        str(a) for a in [*list_at(c, "command"), *list_at(c, "args")]
                    ),
                }
            )
    policy = {k: v for k, v in obj_at(spec, "mlPolicy").items() if k != "numNodes"}
    return {
        "mlPolicy": policy,
        "podGroupPolicy": obj_at(spec, "podGroupPolicy"),
        "containers": jobs,
    }


def runtimes(jc: JobClient, scope: str) -> list[dict[str, Any]]:
    """ClusterTrainingRuntimes, then TrainingRuntimes of ``scope`` (``*``: every namespace)."""
    out = []
    infos = ((R.CLUSTER_TRAINING_RUNTIME, None), (R.TRAINING_RUNTIME, scope or ALL_NAMESPACES))
    for info, ns in infos:
        for obj in jc.objects(info, ns):
            cells = runtime_row(obj, show_kind=True)
            out.append(
                {
                    "cells": dict(
                        zip(["NAME", "KIND", "FRAMEWORK", "NODES", "AGE"], cells, strict=True)
                    ),
                    "namespace": obj_at(obj, "metadata").get("namespace") or "",
                    "setup": _setup(obj),
                    "yaml": _yaml(obj),
                }
            )
    return out


def experiment_detail(
    jc: JobClient, namespace: str, name: str, has_job: Callable[[str], bool]
) -> dict[str, Any]:
    """Everything the Experiment page shows; NotFoundError (a ClientError) when it is gone.

    ``has_job(name)``: whether a trial's TrainJob (named like the trial) still exists; Katib
    deletes it after the trial unless the template says ``retain``, so the page links only to
    those.
    """
    obj = jc.get(R.EXPERIMENT, name, namespace)
    trials = jc.objects(R.TRIAL, namespace, labels={"katib.kubeflow.org/experiment": name})
    spec = obj_at(obj, "spec")
    status = obj_at(obj, "status")
    details = trial_details(obj, trials)
    for d in details:
        d["trainjob"] = has_job(d["name"])
    algorithm = obj_at(spec, "algorithm")
    objective = obj_at(spec, "objective")
    return {
        "row": experiment_summary(obj),
        "conditions": list_at(status, "conditions"),
        "objective": {
            "type": objective.get("type"),
            "metric": objective.get("objectiveMetricName"),
            "goal": objective.get("goal"),
            "additional": list_at(objective, "additionalMetricNames"),
        },
        "algorithm": {
            "name": algorithm.get("algorithmName"),
            "settings": {
                str(s["name"]): s.get("value") for s in dicts(algorithm.get("algorithmSettings"))
            },
        },
        "budget": {
            "max": spec.get("maxTrialCount"),
            "parallel": spec.get("parallelTrialCount"),
            "maxFailed": spec.get("maxFailedTrialCount"),
        },
        "parameters": [
            {"name": n, "type": t, "space": where} for n, t, where in parameter_rows(obj)
        ],
        "best": obj_at(status, "currentOptimalTrial"),
        "trials": details,
        "series": objective_series(obj, details),
        "yaml": _yaml(obj),
    }
