"""DaemonSets: one pod of the template on every Node it selects (the local engine has one).

`daemonset_decision` is the pure rule: for each Node matching the template's ``nodeSelector``
a pod bound to it (as the DaemonSet controller pins its pods), none elsewhere; a pod of an old
template is replaced (RollingUpdate, one Node at a time) or left until deleted (OnDelete).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kubetrain.api.access import obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.kinds import DAEMON_SET, NODE, POD, Kind

from .deployment import template_key
from .loop import Controller, Key
from .pods import is_active, is_available, is_ready, owned_by, pod_from_template, template_hash

__all__ = ["DaemonSetController", "DaemonSetDecision", "daemonset_decision"]

REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"


@dataclass(frozen=True)
class DaemonSetDecision:
    create: list[str] = field(default_factory=list)  # node names
    delete: list[Obj] = field(default_factory=list)
    status: Obj = field(default_factory=dict)


def _revision(daemonset: Obj) -> str:
    return template_hash(template_key(obj_at(daemonset, "spec").get("template")))


def _wanted_on(daemonset: Obj, node: Obj) -> bool:
    pod_spec = obj_at(daemonset, "spec", "template", "spec")
    labels = obj_at(node, "metadata", "labels")
    selector = obj_at(pod_spec, "nodeSelector")
    return all(labels.get(k) == v for k, v in selector.items())


def daemonset_decision(
    daemonset: Obj, nodes: list[Obj], pods: list[Obj], now: datetime
) -> DaemonSetDecision:
    spec = obj_at(daemonset, "spec")
    revision = _revision(daemonset)
    rolling = obj_at(spec, "updateStrategy").get("type", "RollingUpdate") == "RollingUpdate"
    min_ready = int(spec.get("minReadySeconds") or 0)
    wanted = {str(n["metadata"]["name"]) for n in nodes if _wanted_on(daemonset, n)}
    live = [p for p in pods if is_active(p)]
    by_node: dict[str, list[Obj]] = {}
    for pod in live:
        by_node.setdefault(str(obj_at(pod, "spec").get("nodeName") or ""), []).append(pod)
    create: list[str] = []
    delete: list[Obj] = []
    # Ended pods of a DaemonSet are replaced: they go, and a new one follows.
    delete += [
        p for p in pods if not is_active(p) and not obj_at(p, "metadata").get("deletionTimestamp")
    ]
    stale_replaced = False
    for node in sorted(wanted):
        mine = by_node.get(node, [])
        if not mine:
            create.append(node)
            continue
        delete += mine[1:]  # one pod per Node
        old = _label(mine[0], REVISION_LABEL) != revision
        if (
            rolling
            and old
            and not stale_replaced
            and all(is_ready(p) for p in live if p is not mine[0])
        ):
            delete.append(mine[0])
            stale_replaced = True
    for node, mine in by_node.items():
        if node not in wanted:
            delete += mine
    scheduled = [p for n, ps in by_node.items() if n in wanted for p in ps[:1]]
    status: Obj = {
        "currentNumberScheduled": len(scheduled),
        "desiredNumberScheduled": len(wanted),
        "numberMisscheduled": sum(len(ps) for n, ps in by_node.items() if n not in wanted),
        "numberReady": sum(1 for p in scheduled if is_ready(p)),
        "observedGeneration": obj_at(daemonset, "metadata").get("generation", 1),
        "updatedNumberScheduled": sum(
            1 for p in scheduled if _label(p, REVISION_LABEL) == revision
        ),
        "numberAvailable": sum(1 for p in scheduled if is_available(p, min_ready, now)),
    }
    unavailable = len(wanted) - status["numberAvailable"]
    if unavailable > 0:
        status["numberUnavailable"] = unavailable
    status = {k: v for k, v in status.items() if v or k in (
        "currentNumberScheduled", "desiredNumberScheduled", "numberMisscheduled", "numberReady")}  # fmt: skip
    return DaemonSetDecision(create, delete, status)


def _label(pod: Obj, key: str) -> str:
    return str(obj_at(pod, "metadata", "labels").get(key) or "")


def daemonset_pod(daemonset: Obj, node: str) -> Obj:
    """The DaemonSet's pod for ``node``, bound to it."""
    labels = {
        REVISION_LABEL: _revision(daemonset),
        GENERATION_LABEL: str(obj_at(daemonset, "metadata").get("generation", 1)),
    }
    template = obj_at(daemonset, "spec").get("template")
    return pod_from_template(daemonset, template, labels=labels, spec={"nodeName": node})


class DaemonSetController(Controller):
    kind = DAEMON_SET
    watches = (DAEMON_SET, POD, NODE)
    component = "daemonset-controller"

    def keys_for(self, kind: Kind, etype: str, obj: Obj) -> list[Key]:
        if kind == NODE:  # a Node came or changed: every DaemonSet looks again
            return [
                (str(d["metadata"].get("namespace")), str(d["metadata"]["name"]))
                for d in self.shared.informers[DAEMON_SET].items()
            ]
        return list(super().keys_for(kind, etype, obj))

    async def reconcile(self, key: Key) -> float | None:
        daemonset = self.get(key)
        if daemonset is None or obj_at(daemonset, "metadata").get("deletionTimestamp"):
            return None
        nodes = list(self.shared.informers[NODE].items())
        pods = owned_by(daemonset, self.cached(POD, key[0]))
        now = self.shared.clock()
        decision = daemonset_decision(daemonset, nodes, pods, now)
        for pod in decision.delete:
            await self.delete(POD, pod)
            self.event(
                daemonset, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}"
            )
        for node in decision.create:
            created = await self.create(POD, daemonset_pod(daemonset, node))
            self.event(
                daemonset,
                "Normal",
                "SuccessfulCreate",
                f"Created pod: {created['metadata']['name']}",
            )
        if decision.create or decision.delete:
            pods = owned_by(daemonset, self.cached(POD, key[0]))
            decision = daemonset_decision(daemonset, nodes, pods, now)
        await self.write_status(daemonset, decision.status)
        return None
