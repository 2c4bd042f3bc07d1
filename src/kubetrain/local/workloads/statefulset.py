"""StatefulSets: pods with stable ordinal names, started in order, updated from the top down.

`statefulset_decision` is the pure rule: pods ``<set>-0 … <set>-(n-1)``, each named under the
governing Service (``hostname`` = its name, ``subdomain`` = ``serviceName``) with its own claims
(``<template>-<set>-<ordinal>``); OrderedReady starts ordinal i only once every lower one is
Running and Ready and removes the highest first; Parallel does both at once; RollingUpdate
replaces pods of an old revision from the highest ordinal down to ``partition``, one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, as_list, obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.client import ApiError
from kubetrain.kube.kinds import POD, STATEFUL_SET

from .deployment import template_key
from .loop import Controller, Key
from .pods import (
    is_active,
    is_available,
    is_ready,
    owned_by,
    pod_from_template,
    replicas_of,
    template_hash,
)

__all__ = [
    "StatefulSetController",
    "StatefulSetDecision",
    "revision_of_set",
    "statefulset_decision",
]

REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


@dataclass(frozen=True)
class StatefulSetDecision:
    create: list[int] = field(default_factory=list)  # ordinals
    delete: list[Obj] = field(default_factory=list)
    status: Obj = field(default_factory=dict)


def revision_of_set(statefulset: Obj) -> str:
    """``<set>-<hash of the pod template>``: the update revision pods are labelled with."""
    template = obj_at(statefulset, "spec").get("template")
    return f"{statefulset['metadata']['name']}-{template_hash(template_key(template))}"


def ordinal_of(statefulset: Obj, pod: Obj) -> int:
    prefix = f"{statefulset['metadata']['name']}-"
    name = str(obj_at(pod, "metadata").get("name"))
    tail = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else -1


def _pod_revision(pod: Obj) -> str:
    return str(obj_at(pod, "metadata", "labels").get(REVISION_LABEL) or "")


def statefulset_decision(statefulset: Obj, pods: list[Obj], now: datetime) -> StatefulSetDecision:
    spec = obj_at(statefulset, "spec")
    desired = replicas_of(statefulset)
    parallel = spec.get("podManagementPolicy") == "Parallel"
    update = obj_at(spec, "updateStrategy")
    rolling = update.get("type", "RollingUpdate") == "RollingUpdate"
    partition = int(obj_at(update, "rollingUpdate").get("partition") or 0)
    revision = revision_of_set(statefulset)
    min_ready = int(spec.get("minReadySeconds") or 0)
    by_ordinal: dict[int, Obj] = {}
    for pod in pods:
        index = ordinal_of(statefulset, pod)
        if index >= 0 and (is_active(pod) or index not in by_ordinal):
            by_ordinal[index] = pod
    live = {i: p for i, p in by_ordinal.items() if is_active(p)}
    terminating = any(not is_active(p) and not _ended(p) for p in by_ordinal.values())
    # Ended pods are replaced (a StatefulSet's pods always run): deleted now, created anew next.
    ended = [p for p in by_ordinal.values() if _ended(p)]
    delete: list[Obj] = list(ended)
    # A name still taken (a pod ending or stopping) is free again once that pod is gone.
    missing = [i for i in range(desired) if i not in by_ordinal]
    create: list[int] = []
    if parallel:
        create = missing
    elif missing and not terminating and not ended:
        # OrderedReady: the lowest missing ordinal, once every lower one is Ready.
        first = missing[0]
        if all(i in live and is_ready(live[i]) for i in range(first)):
            create = [first]
    surplus = sorted((i for i in live if i >= desired), reverse=True)
    if surplus:
        everyone_ready = all(is_ready(p) for i, p in live.items() if i < desired)
        take = surplus if parallel else ([surplus[0]] if everyone_ready and not terminating else [])
        delete += [live[i] for i in take]
    elif rolling and not create and not delete and not terminating:
        stale = sorted(
            (i for i, p in live.items() if i >= partition and _pod_revision(p) != revision),
            reverse=True,
        )
        if stale and all(is_ready(p) for p in live.values()):
            delete.append(live[stale[0]])
    in_range = list(live.values())
    updated = sum(1 for p in in_range if _pod_revision(p) == revision)
    current_revision = str(obj_at(statefulset, "status").get("currentRevision") or revision)
    if updated == len(in_range) == desired:
        current_revision = revision
    status: Obj = {
        "observedGeneration": obj_at(statefulset, "metadata").get("generation", 1),
        "replicas": len(in_range),
        "readyReplicas": sum(1 for p in in_range if is_ready(p)),
        "currentReplicas": sum(1 for p in in_range if _pod_revision(p) == current_revision),
        "updatedReplicas": updated,
        "availableReplicas": sum(1 for p in in_range if is_available(p, min_ready, now)),
        "currentRevision": current_revision,
        "updateRevision": revision,
        "collisionCount": 0,
    }
    status = {
        k: v
        for k, v in status.items()
        if v or k in ("replicas", "availableReplicas", "collisionCount")
    }
    return StatefulSetDecision(create, delete, status)


def _ended(pod: Obj) -> bool:
    return str(obj_at(pod, "status").get("phase")) in ("Succeeded", "Failed")


def statefulset_pod(statefulset: Obj, ordinal: int) -> Obj:
    """Pod ``<set>-<ordinal>``: named under the governing Service, with its own claims."""
    spec = obj_at(statefulset, "spec")
    set_name = str(statefulset["metadata"]["name"])
    name = f"{set_name}-{ordinal}"
    labels = {
        REVISION_LABEL: revision_of_set(statefulset), POD_NAME_LABEL: name,
        POD_INDEX_LABEL: str(ordinal),
    }  # fmt: skip
    extra: dict[str, Any] = {"hostname": name}
    if spec.get("serviceName"):
        extra["subdomain"] = spec["serviceName"]
    pod = pod_from_template(statefulset, spec.get("template"), name=name, labels=labels, spec=extra)
    volumes = [v for v in as_list(pod["spec"].get("volumes"))]
    for claim in as_list(spec.get("volumeClaimTemplates")):
        tname = str(as_dict(as_dict(claim).get("metadata")).get("name"))
        if not any(as_dict(v).get("name") == tname for v in volumes):
            claim_name = f"{tname}-{set_name}-{ordinal}"
            volumes.append({"name": tname, "persistentVolumeClaim": {"claimName": claim_name}})
    if volumes:
        pod["spec"]["volumes"] = volumes
    return pod


class StatefulSetController(Controller):
    kind = STATEFUL_SET
    watches = (STATEFUL_SET, POD)
    component = "statefulset-controller"

    async def reconcile(self, key: Key) -> float | None:
        statefulset = self.get(key)
        if statefulset is None or obj_at(statefulset, "metadata").get("deletionTimestamp"):
            return None
        pods = owned_by(statefulset, self.cached(POD, key[0]))
        now = self.shared.clock()
        decision = statefulset_decision(statefulset, pods, now)
        for pod in decision.delete:
            await self.delete(POD, pod)
            self.event(statefulset, "Normal", "SuccessfulDelete",
                       f"delete Pod {pod['metadata']['name']} in StatefulSet {key[1]} successful")  # fmt: skip
        for ordinal in decision.create:
            try:
                created = await self.create(POD, statefulset_pod(statefulset, ordinal))
            except ApiError as err:
                if not err.conflict:
                    raise
                continue  # its predecessor of the same name is still going
            self.event(statefulset, "Normal", "SuccessfulCreate",
                       f"create Pod {created['metadata']['name']} in StatefulSet {key[1]} successful")  # fmt: skip
        if decision.create or decision.delete:
            pods = owned_by(statefulset, self.cached(POD, key[0]))
            decision = statefulset_decision(statefulset, pods, now)
        await self.write_status(statefulset, decision.status)
        return None
