"""LeaderWorkerSet's rules (``leaderworkerset.x-k8s.io/v1``, LWS v0.10), as pure functions.

What a LWS controller, its pod webhook and its StatefulSets do together, folded into one
decision: group ``g`` is a leader pod ``<lws>-<g>`` and workers ``<lws>-<g>-<i>``
(``i`` = 1..size-1), all with LWS's labels (name, group index, worker index, group key,
template revision), its annotations (size; the leader's name on workers), hostname = pod name
and subdomain = the headless Service of the ``networkConfig.subdomainPolicy``, and the
``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX`` env first in every container.
``Shared`` (the default): one Service ``<lws>`` over every pod, owned by the LWS.
``UniquePerReplica``: one Service per group, named after its leader ``<lws>-<g>``, selecting
that group's pods and owned by the leader pod (so it goes and comes back with the group).

The LeaderWorkerSet is read as the API server stores it, with its CRD's defaults filled in.
With ``restartPolicy`` ``RecreateGroupOnPodRestart`` (the default), a pod of a group that
restarted a container or is being deleted takes its whole group down; the group then comes
back whole. ``Available`` is True once every group's pods are Ready, else ``Progressing``.

Not here (yet): rolling updates of a changed template (new pods get the new template; running
groups keep theirs), subgroups, exclusive topology, volumeClaimTemplates.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, as_int, as_list, obj_at
from kubetrain.api.core import OwnerReference
from kubetrain.api.meta import condition_true, set_condition

__all__ = [
    "API_VERSION",
    "GROUP_INDEX",
    "GROUP_KEY",
    "LEADER_NAME",
    "NAME",
    "REVISION",
    "SIZE",
    "SUBDOMAIN_POLICY",
    "WORKER_INDEX",
    "Plan",
    "desired_pods",
    "headless_services",
    "plan",
]

Obj = dict[str, Any]

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
_P = "leaderworkerset.sigs.k8s.io/"
NAME = _P + "name"
GROUP_INDEX = _P + "group-index"
WORKER_INDEX = _P + "worker-index"
GROUP_KEY = _P + "group-key"
REVISION = _P + "template-revision-hash"
SIZE = _P + "size"
LEADER_NAME = _P + "leader-name"
SUBDOMAIN_POLICY = _P + "subdomainPolicy"
_RECREATE = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _spec(lws: Mapping[str, Any]) -> tuple[int, int, Obj]:
    # LWS's defaults (replicas, size, restartPolicy, startupPolicy) are its CRD's and its
    # webhook's (`admission.LwsDefaulter`), which the API server applies: they are not
    # repeated here, and a field left out means none.
    spec = obj_at(lws, "spec")
    template = obj_at(spec, "leaderWorkerTemplate")
    return as_int(spec.get("replicas"), 0), as_int(template.get("size"), 0), template


def revision(lws: Mapping[str, Any]) -> str:
    """A hash of the templates: pods made from another template carry another one."""
    _, _, template = _spec(lws)
    return _sha1(json.dumps(template, sort_keys=True, separators=(",", ":")))[:10]


def _unique_per_replica(lws: Mapping[str, Any]) -> bool:
    # No networkConfig (the defaulting webhook not run) means Shared, as in LWS.
    return obj_at(lws, "spec", "networkConfig").get("subdomainPolicy") == "UniquePerReplica"


def _owner(
    obj: Mapping[str, Any], api_version: str = API_VERSION, kind: str = KIND
) -> OwnerReference:
    meta = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _with_lws_env(container: Obj, env: list[Obj]) -> None:
    # LWS's variables first, then the container's own (a name it already has wins over none:
    # upstream skips a variable the container sets itself).
    own = as_list(container.get("env"))
    names = {e.get("name") for e in own}
    container["env"] = [e for e in env if e["name"] not in names] + own


def _pod(lws: Mapping[str, Any], group: int, worker: int) -> Obj:
    name, ns = lws["metadata"]["name"], lws["metadata"].get("namespace", "default")
    _, size, template = _spec(lws)
    leader = f"{name}-{group}"
    tpl = template.get("leaderTemplate") if worker == 0 else None
    pod_tpl = copy.deepcopy(as_dict(tpl) or obj_at(template, "workerTemplate"))
    meta = obj_at(pod_tpl, "metadata")
    spec = obj_at(pod_tpl, "spec")
    pod_name = leader if worker == 0 else f"{leader}-{worker}"
    labels = {
        **obj_at(meta, "labels"),
        NAME: name,
        GROUP_INDEX: str(group),
        WORKER_INDEX: str(worker),
        GROUP_KEY: _sha1(f"{ns}/{leader}"),
        REVISION: revision(lws),
    }
    annotations = {**obj_at(meta, "annotations"), SIZE: str(size)}
    if worker:
        annotations[LEADER_NAME] = leader
    spec.setdefault("hostname", pod_name)
    if _unique_per_replica(lws):
        # LWS marks the leader (its pod webhook then sets the subdomain); the workers get
        # theirs from their StatefulSet, whose serviceName is the leader's name.
        if not worker:
            annotations[SUBDOMAIN_POLICY] = "UniquePerReplica"
        spec["subdomain"] = leader
    else:
        spec.setdefault("subdomain", name)
    env = [
        {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{spec['subdomain']}.{ns}"},
        {"name": "LWS_GROUP_SIZE", "value": str(size)},
        {"name": "LWS_WORKER_INDEX", "value": str(worker)},
    ]
    for key in ("initContainers", "containers"):
        for container in as_list(spec.get(key)):
            _with_lws_env(container, env)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [_owner(lws)],
        },
        "spec": spec,
    }


def desired_pods(lws: Mapping[str, Any]) -> list[Obj]:
    """Every pod of every group, leaders first within a group."""
    replicas, size, _ = _spec(lws)
    return [_pod(lws, g, w) for g in range(replicas) for w in range(size)]


def _service(lws: Mapping[str, Any], name: str, selector: Obj, owner: OwnerReference) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": lws["metadata"].get("namespace", "default"),
            "labels": {NAME: lws["metadata"]["name"]},
            "ownerReferences": [owner],
        },
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True},
    }


def headless_services(lws: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The headless Services whose names are the pods' subdomains: ``Shared``, the LWS's one;
    ``UniquePerReplica``, one per leader pod among ``pods`` that exists (has a uid) and is not
    going, since the leader owns it."""
    name = lws["metadata"]["name"]
    if not _unique_per_replica(lws):
        return [_service(lws, name, {NAME: name}, _owner(lws))]
    out = []
    for pod in pods:
        meta = obj_at(pod, "metadata")
        labels = obj_at(meta, "labels")
        if labels.get(WORKER_INDEX) != "0" or not meta.get("uid") or meta.get("deletionTimestamp"):
            continue
        selector = {NAME: name, GROUP_INDEX: str(labels.get(GROUP_INDEX))}
        out.append(_service(lws, str(meta["name"]), selector, _owner(pod, "v1", "Pod")))
    return out


def _ready(pod: Mapping[str, Any]) -> bool:
    status = obj_at(pod, "status")
    return status.get("phase") == "Running" and condition_true(status.get("conditions"), "Ready")


def _broken(pod: Mapping[str, Any]) -> bool:
    """LWS's trigger for recreating a group: a restarted container, a pod being deleted; and,
    since no StatefulSet recreates it here, a pod that ended."""
    meta, status = obj_at(pod, "metadata"), obj_at(pod, "status")
    if meta.get("deletionTimestamp"):
        return True
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        return True
    statuses = as_list(status.get("containerStatuses")) + as_list(
        status.get("initContainerStatuses")
    )
    return phase in ("Running", "Pending") and any(
        int(s.get("restartCount", 0)) > 0 for s in statuses
    )


@dataclass
class Plan:
    """What to do next for one LeaderWorkerSet."""

    create: list[Obj] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: Obj = field(default_factory=dict)
    # (group, the pod that took it down) for each group recreated now.
    recreated: list[tuple[int, str]] = field(default_factory=list)


def plan(lws: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: datetime) -> Plan:
    """The next step for ``lws`` given its pods (those with its name label)."""
    replicas, size, template = _spec(lws)
    name = lws["metadata"]["name"]
    by_name = {str(p["metadata"]["name"]): p for p in pods}
    out = Plan()
    groups_ready = 0
    groups_made = 0
    policy = template.get("restartPolicy")
    leader_ready_first = obj_at(lws, "spec").get("startupPolicy") == "LeaderReady"
    wanted = desired_pods(lws)
    wanted_names = {p["metadata"]["name"] for p in wanted}
    for g in range(replicas):
        members = wanted[g * size : (g + 1) * size]
        present = [
            by_name[m["metadata"]["name"]] for m in members if m["metadata"]["name"] in by_name
        ]
        if present and present[0] is by_name.get(f"{name}-{g}"):
            groups_made += 1
        broken = next((p for p in present if _broken(p)), None)
        if broken is not None and policy in _RECREATE:
            live = [p for p in present if not as_dict(p["metadata"]).get("deletionTimestamp")]
            out.delete.extend(str(p["metadata"]["name"]) for p in live)
            if live:
                out.recreated.append((g, str(broken["metadata"]["name"])))
            continue
        if len(present) == size and all(_ready(p) for p in present):
            groups_ready += 1
        leader = by_name.get(f"{name}-{g}")
        for m in members:
            if m["metadata"]["name"] in by_name:
                continue
            is_worker = m["metadata"]["labels"][WORKER_INDEX] != "0"
            if is_worker and (leader is None or (leader_ready_first and not _ready(leader))):
                continue
            out.create.append(m)
    # Pods of groups beyond replicas (scaled down) go.
    out.delete.extend(
        n for n, p in by_name.items()
        if n not in wanted_names and not as_dict(p["metadata"]).get("deletionTimestamp")
    )  # fmt: skip
    out.status = _status(lws, groups_made, groups_ready, replicas, now)
    return out


def _status(lws: Mapping[str, Any], made: int, ready: int, replicas: int, now: datetime) -> Obj:
    old = obj_at(lws, "status")
    name = lws["metadata"]["name"]
    conditions = copy.deepcopy(as_list(old.get("conditions")))
    available = ready >= replicas
    gen = lws["metadata"].get("generation", 1)
    up = {"type": "Available", "reason": "AllGroupsReady", "message": "All replicas are ready"}
    moving = {
        "type": "Progressing",
        "reason": "GroupsProgressing",
        "message": "Replicas are progressing",
    }
    # LWS keeps the two mutually exclusive: the one set True turns the other False.
    on, off = (up, moving) if available else (moving, up)
    set_condition(conditions, {**on, "status": "True", "observedGeneration": gen}, now)
    if any(c.get("type") == off["type"] for c in conditions):
        set_condition(conditions, {**off, "status": "False", "observedGeneration": gen}, now)
    return {
        "conditions": conditions,
        "readyReplicas": ready,
        "updatedReplicas": made,
        "replicas": made,
        "hpaPodSelector": f"{NAME}={name},{WORKER_INDEX}=0",
        "observedGeneration": gen,
    }
