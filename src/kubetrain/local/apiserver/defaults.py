"""Server-side defaults of the core kinds the engine stores without a schema.

kube-apiserver fills in fields a client leaves out (``SetDefaults_*`` in k8s.io/kubernetes
pkg/apis/*/v1/defaults.go) before it stores an object; clients and controllers read them back
(``kubectl get svc`` shows ``ClusterIP``, a Deployment controller reads ``spec.replicas``).
These are the defaults of the top-level workload and Service fields; pod templates are stored
as sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api.access import as_dict, dicts, obj_at

__all__ = ["apply_core_defaults", "generate_job_selector"]

Obj = dict[str, Any]


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _replicas(obj: Obj) -> Obj:
    spec = _spec(obj)
    spec.setdefault("replicas", 1)
    return spec


def _deployment(obj: Obj) -> None:
    spec = _replicas(obj)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _replica_set(obj: Obj) -> None:
    _replicas(obj)


def _stateful_set(obj: Obj) -> None:
    spec = _replicas(obj)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    spec.setdefault("revisionHistoryLimit", 10)


def _daemon_set(obj: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault(
        "updateStrategy",
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
    )
    spec.setdefault("revisionHistoryLimit", 10)


def _job(obj: Obj) -> None:
    spec = _spec(obj)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1  # one pod to success when neither is said
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )


def _service(obj: Obj) -> None:
    spec = _spec(obj)
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in dicts(spec.get("ports")):
        port.setdefault("protocol", "TCP")
        if "port" in port:
            port.setdefault("targetPort", port["port"])


_DEFAULTS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "ReplicaSet"): _replica_set,
    ("apps/v1", "StatefulSet"): _stateful_set,
    ("apps/v1", "DaemonSet"): _daemon_set,
    ("v1", "ReplicationController"): _replica_set,
    ("batch/v1", "Job"): _job,
    ("v1", "Service"): _service,
}


def apply_core_defaults(api_version: str, kind: str, obj: Obj) -> None:
    """Fill in ``obj``'s server-side defaults in place (nothing for other kinds)."""
    fill = _DEFAULTS.get((api_version, kind))
    if fill is not None:
        fill(obj)


def generate_job_selector(job: Obj) -> None:
    """What the Job registry does on create unless ``spec.manualSelector``: select the Job's
    pods by its uid, and label the pod template with the uid and the Job's name."""
    spec = _spec(job)
    if spec.get("manualSelector") is True:
        return
    meta = obj_at(job, "metadata")
    uid, name = str(meta.get("uid", "")), str(meta.get("name", ""))
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        template_meta = template.setdefault("metadata", {})
        if isinstance(template_meta, dict):
            template_meta["labels"] = {**as_dict(template_meta.get("labels")), **labels}
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
