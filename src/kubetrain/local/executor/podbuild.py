"""The Pod object a cluster would create for one completion index of one JobSet child Job.

JobSet stamps its labels and annotations on the Job's pod template, the Job controller adds
its own and names the pod ``<job>-<index>-<5 random chars>`` with hostname ``<job>-<index>``.
The executor keeps no Job objects, so the pod's ownerReference points at the JobSet: garbage
collection then still cascades TrainJob → JobSet → Pods.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at
from kubetrain.api.core import ObjectMeta, OwnerReference
from kubetrain.api.labels import (
    COORDINATOR_LABEL,
    JOB_COMPLETION_INDEX,
    JOB_GLOBAL_INDEX_LABEL,
    JOB_INDEX_LABEL,
    JOB_NAME_LABEL,
    JOBSET_API_VERSION,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_NAME_LABEL,
    REPLICATED_JOB_REPLICAS_LABEL,
    RESTART_ATTEMPT_LABEL,
)

from . import labels as L
from .jobs import job_name
from .spec import JobSetSpec, ReplicatedJob

__all__ = ["build_pod", "job_uid", "jobset_labels"]


def job_uid(spec: JobSetSpec, name: str, attempt: int) -> str:
    """A stable uid for a virtual Job: the same Job has the same uid across daemon restarts."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{spec.uid}/{name}/{attempt}"))


def _global_index(spec: JobSetSpec, rjob: str, index: int, group: str | None = None) -> str:
    total = 0
    for r in spec.replicated_jobs:
        if group is not None and r.group != group:
            continue
        if r.name == rjob:
            return str(total + index)
        total += r.replicas
    return ""


def jobset_labels(
    spec: JobSetSpec, rjob: ReplicatedJob, index: int, attempt: int
) -> dict[str, str]:
    """What JobSet writes, as both labels and annotations, on a child Job's pod template."""
    name = job_name(spec.name, rjob.name, index)
    out = {
        JOBSET_NAME_LABEL: spec.name,
        L.JOBSET_UID: spec.uid,
        REPLICATED_JOB_NAME_LABEL: rjob.name,
        RESTART_ATTEMPT_LABEL: str(attempt),
        REPLICATED_JOB_REPLICAS_LABEL: str(rjob.replicas),
        L.GLOBAL_REPLICAS: str(spec.total_replicas),
        JOB_INDEX_LABEL: str(index),
        L.JOB_KEY: hashlib.sha1(f"{spec.namespace}/{name}".encode()).hexdigest(),
        JOB_GLOBAL_INDEX_LABEL: _global_index(spec, rjob.name, index),
        L.GROUP_NAME: rjob.group,
        L.GROUP_REPLICAS: str(
            sum(r.replicas for r in spec.replicated_jobs if r.group == rjob.group)
        ),
        L.JOB_GROUP_INDEX: _global_index(spec, rjob.name, index, rjob.group),
    }
    if spec.coordinator:
        out[COORDINATOR_LABEL] = spec.coordinator
    return out


def _has_mount(pod_spec: dict[str, Any], volume: str) -> bool:
    containers = [*dicts(pod_spec.get("containers")), *dicts(pod_spec.get("initContainers"))]
    return any(m.get("name") == volume for c in containers for m in dicts(c.get("volumeMounts")))


def build_pod(
    spec: JobSetSpec,
    rjob: ReplicatedJob,
    index: int,
    completion_index: int,
    attempt: int,
    suffix: str,
    *,
    node_name: str,
) -> dict[str, Any]:
    """The Pod for completion ``completion_index`` of Job ``index`` of ``rjob`` at ``attempt``."""
    jname = job_name(spec.name, rjob.name, index)
    uid = job_uid(spec, jname, attempt)
    template = rjob.pod_template
    stamped = jobset_labels(spec, rjob, index, attempt)
    tmeta = obj_at(template, "metadata")
    labels = {
        **obj_at(tmeta, "labels"),
        **stamped,
        L.CONTROLLER_UID: uid,
        JOB_NAME_LABEL: jname,
        L.CONTROLLER_UID_LEGACY: uid,
        L.JOB_NAME_LEGACY: jname,
        JOB_COMPLETION_INDEX: str(completion_index),
    }
    annotations = {
        **obj_at(tmeta, "annotations"),
        **stamped,
        JOB_COMPLETION_INDEX: str(completion_index),
    }
    pod_spec = copy.deepcopy(obj_at(template, "spec"))
    if not pod_spec.get("hostname"):
        pod_spec["hostname"] = f"{jname}-{completion_index}"
    if spec.dns_hostnames:
        pod_spec["subdomain"] = spec.subdomain
    # The pod is bound at creation: this machine is the only node.
    pod_spec["nodeName"] = node_name
    volumes = list(as_list(pod_spec.get("volumes")))
    for tname, claim in spec.claim_templates:
        if _has_mount(pod_spec, tname) and not any(v.get("name") == tname for v in volumes):
            volumes.append({"name": tname, "persistentVolumeClaim": {"claimName": claim}})
    if volumes:
        pod_spec["volumes"] = volumes
    owner: OwnerReference = {
        "apiVersion": JOBSET_API_VERSION,
        "kind": JOBSET_KIND,
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta: ObjectMeta = {
        "name": f"{jname}-{completion_index}-{suffix}",
        "generateName": f"{jname}-{completion_index}-",
        "namespace": spec.namespace,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [owner],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
