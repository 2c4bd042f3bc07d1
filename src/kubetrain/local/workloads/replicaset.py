"""ReplicaSets and ReplicationControllers: keep ``spec.replicas`` pods of the template alive.

`replica_decision` is the pure rule (pods in, what to create and delete plus the status out);
`ReplicaSetController` reads the caches and writes the result, for either kind (a
ReplicationController is a ReplicaSet with a plain map selector).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.kinds import POD, REPLICA_SET, REPLICATION_CONTROLLER, Kind
from kubetrain.local.executor.jobs import container_restarts, pod_phase

from .loop import Controller, Key, Workloads
from .pods import (
    is_active,
    is_available,
    is_ready,
    owned_by,
    pod_from_template,
    rc_selector,
    replicas_of,
    selector_matches,
)

__all__ = ["ReplicaDecision", "ReplicaSetController", "deletion_order", "replica_decision"]

# Pods created per reconcile at most: a ReplicaSet scaled to 10,000 by mistake must not stall
# the engine's one event loop in a single step (the controller-manager's slow start, simplified).
MAX_BURST = 100

_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class ReplicaDecision:
    create: int
    delete: list[Obj] = field(default_factory=list)
    status: Obj = field(default_factory=dict)


def deletion_order(pods: list[Obj]) -> list[Obj]:
    """Which pods go first when there are too many, as the ReplicaSet controller ranks them:
    unscheduled before scheduled, pending before running, not ready before ready, more
    restarts first, newest first."""
    newest_first = sorted(
        pods, key=lambda p: str(obj_at(p, "metadata").get("creationTimestamp") or ""),
        reverse=True,
    )  # fmt: skip
    return sorted(
        newest_first,
        key=lambda p: (
            bool(obj_at(p, "spec").get("nodeName")),
            _PHASE_RANK.get(pod_phase(p), 3),
            is_ready(p),
            -container_restarts(p),
        ),
    )


def replica_decision(
    owner: Obj, selector: Any, pods: list[Obj], *, now: datetime
) -> ReplicaDecision:
    """What the controller does next for ``owner`` (a ReplicaSet or ReplicationController)
    given the pods it controls, and the status it then reports."""
    spec = obj_at(owner, "spec")
    desired = replicas_of(owner)
    min_ready = int(spec.get("minReadySeconds") or 0)
    active = [p for p in pods if is_active(p)]
    deleting = bool(obj_at(owner, "metadata").get("deletionTimestamp"))
    create, delete = 0, []
    if not deleting:
        if len(active) < desired:
            create = min(desired - len(active), MAX_BURST)
        elif len(active) > desired:
            delete = deletion_order(active)[: len(active) - desired]
    labels = [obj_at(p, "metadata", "labels") for p in active]
    status: Obj = {"replicas": len(active)}
    counts = {
        "fullyLabeledReplicas": sum(1 for lab in labels if selector_matches(selector, lab)),
        "readyReplicas": sum(1 for p in active if is_ready(p)),
        "availableReplicas": sum(1 for p in active if is_available(p, min_ready, now)),
    }
    status.update({k: v for k, v in counts.items() if v})
    generation = obj_at(owner, "metadata").get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    return ReplicaDecision(create, delete, status)


class ReplicaSetController(Controller):
    """The ReplicaSet controller (``kind=REPLICA_SET``) or the ReplicationController manager."""

    def __init__(self, shared: Workloads, kind: Kind = REPLICA_SET) -> None:
        self.kind = kind
        self.watches = (kind, POD)
        self.component = (
            "replicaset-controller" if kind == REPLICA_SET else "replication-controller"
        )
        super().__init__(shared)

    def selector(self, owner: Obj) -> Any:
        spec = obj_at(owner, "spec")
        if self.kind == REPLICATION_CONTROLLER:
            # An RC without a selector selects its template's labels (the API server's default).
            plain = spec.get("selector") or as_dict(obj_at(spec, "template").get("metadata")).get(
                "labels"
            )
            return rc_selector(plain)
        return spec.get("selector")

    async def reconcile(self, key: Key) -> float | None:
        owner = self.get(key)
        if owner is None:
            return None  # gone: the API server's garbage collector removes its pods
        pods = owned_by(owner, self.cached(POD, key[0]))
        now = self.shared.clock()
        decision = replica_decision(owner, self.selector(owner), pods, now=now)
        template = obj_at(owner, "spec").get("template")
        for _ in range(decision.create):
            created = await self.create(POD, pod_from_template(owner, template))
            self.event(
                owner, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )
        for pod in decision.delete:
            await self.delete(POD, pod)
            self.event(
                owner, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}"
            )
        if decision.create or decision.delete:
            # Count again from the cache, which now holds what was just written.
            pods = owned_by(owner, self.cached(POD, key[0]))
            decision = replica_decision(owner, self.selector(owner), pods, now=now)
        await self.write_status(owner, decision.status)
        min_ready = int(obj_at(owner, "spec").get("minReadySeconds") or 0)
        ready, available = (
            decision.status.get(k, 0) for k in ("readyReplicas", "availableReplicas")
        )
        # Ready pods become available after minReadySeconds without any event: look again then.
        return float(min_ready) if min_ready and ready > available else None
