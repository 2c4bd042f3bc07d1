"""Katib's webhooks for the embedded API server: Experiment defaulting and validation, and the
pod webhook's part that matters without a sidecar (trial labels, ``KATIB_TRIAL_NAME``, and the
primary pod's output served as the collector container's log)."""

from __future__ import annotations

import copy
import shlex
from typing import Any, Protocol

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.labels import JOBSET_NAME_LABEL, LOG_ALIASES_ANNOTATION, TRAINER_API_VERSION
from kubetrain.runtime.katib.experiment import (
    KATIB_API_VERSION,
    default_experiment,
    validate_experiment,
)

__all__ = ["COLLECTOR_CONTAINER", "METRICS_FILE_MARKER", "TRIAL_LABEL", "KatibAdmission"]

TRIAL_LABEL = "katib.kubeflow.org/trial"
# The sidecar Katib injects for StdOut/File collectors; the official SDK reads its log.
COLLECTOR_CONTAINER = "metrics-logger-and-collector"
# File collector: after the training process ends, the primary container prints this line and
# then the metrics file, which the Experiment controller reads from the pod's log (locally there
# is no sidecar to share the file with).
METRICS_FILE_MARKER = "--- kubetrain: katib metrics file ---"


class _Reader(Protocol):
    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None: ...


class KatibAdmission:
    """``mutate``/``validate`` for Experiments, and trial pods' mutation."""

    def mutate(
        self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, *, reader: _Reader
    ) -> dict[str, Any]:
        if operation not in ("CREATE", "UPDATE"):
            return obj
        if obj.get("apiVersion") == KATIB_API_VERSION and obj.get("kind") == "Experiment":
            return default_experiment(obj)
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Pod" and operation == "CREATE":
            return _trial_pod(obj, reader)
        return obj

    def validate(
        self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, *, reader: _Reader
    ) -> tuple[list[FieldError], list[str]]:
        if operation not in ("CREATE", "UPDATE"):
            return [], []
        if obj.get("apiVersion") != KATIB_API_VERSION or obj.get("kind") != "Experiment":
            return [], []
        return validate_experiment(obj, old if operation == "UPDATE" else None), []


def _trial_pod(pod: dict[str, Any], reader: _Reader) -> dict[str, Any]:
    meta = obj_at(pod, "metadata")
    labels = obj_at(meta, "labels")
    job_name = labels.get(JOBSET_NAME_LABEL)
    namespace = meta.get("namespace")
    if not job_name:
        return pod
    trial = reader.get(KATIB_API_VERSION, "Trial", namespace, job_name)
    job = reader.get(TRAINER_API_VERSION, "TrainJob", namespace, job_name)
    if trial is None or job is None:
        return pod
    # The TrainJob belongs to the Trial, or, for the moment before the Trial exists, to the
    # Trial's Experiment (see kubetrain.local.katib.controller).
    owners = {r.get("uid") for r in list_at(trial["metadata"], "ownerReferences")}
    owners.add(trial["metadata"].get("uid"))
    owners.discard(None)
    if not any(o.get("uid") in owners for o in list_at(job["metadata"], "ownerReferences")):
        return pod
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    meta.setdefault("labels", {})[TRIAL_LABEL] = job_name
    spec = obj_at(trial, "spec")
    primary = spec.get("primaryContainerName") or "node"
    for container in list_at(pod, "spec", "containers"):
        if container.get("name") == primary:
            env = container.setdefault("env", [])
            if not any(e.get("name") == "KATIB_TRIAL_NAME" for e in env):
                env.append({"name": "KATIB_TRIAL_NAME", "value": job_name})
            wanted = obj_at(spec, "primaryPodLabels")
            if all(meta["labels"].get(k) == v for k, v in wanted.items()):
                annotations = meta.setdefault("annotations", {})
                annotations[LOG_ALIASES_ANNOTATION] = f"{COLLECTOR_CONTAINER}={primary}"
                _file_collector(pod, container, obj_at(spec, "metricsCollector"))
    return pod


def _file_collector(
    pod: dict[str, Any], container: dict[str, Any], collector: dict[str, Any]
) -> None:
    """Katib's File collector without a sidecar: the file's folder is an emptyDir (Katib's
    ``metrics-volume``), and the file is printed after the command ends, exit code kept."""
    if obj_at(collector, "collector").get("kind") != "File" or not container.get("command"):
        return
    path = str(obj_at(collector, "source", "fileSystemPath").get("path") or "")
    folder = path.rpartition("/")[0] or "/"
    volumes = pod.setdefault("spec", {}).setdefault("volumes", [])
    if not any(v.get("name") == "metrics-volume" for v in volumes):
        volumes.append({"name": "metrics-volume", "emptyDir": {}})
        container.setdefault("volumeMounts", []).append(
            {"name": "metrics-volume", "mountPath": folder}
        )
    script = (
        '"$@"; rc=$?; '
        f"echo {shlex.quote(METRICS_FILE_MARKER)}; cat {shlex.quote(path)} 2>/dev/null; exit $rc"
    )
    argv = [*container["command"], *list_at(container, "args")]
    container["command"] = ["sh", "-c", script, "sh", *argv]
    container.pop("args", None)
