"""Deployments: a ReplicaSet per pod template, rolled from old to new as the strategy says.

Pure parts: `read_strategy` (the apps/v1 defaults), `new_replica_set` (the ReplicaSet a template
needs), `rollout_targets` (every ReplicaSet's next ``spec.replicas`` for RollingUpdate with
maxSurge/maxUnavailable, or Recreate) and `deployment_status` (what ``kubectl rollout status``
reads). `DeploymentController` reads the caches and writes the result.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, dicts, list_at, obj_at
from kubetrain.api.meta import format_time, parse_time
from kubetrain.api.types import Obj
from kubetrain.kube.client import ApiError
from kubetrain.kube.kinds import DEPLOYMENT, POD, REPLICA_SET, Kind

from .loop import Controller, Key
from .pods import controller_uid, is_active, owned_by, owner_reference, replicas_of, template_hash

__all__ = [
    "DeploymentController",
    "Strategy",
    "deployment_status",
    "matches_template",
    "new_replica_set",
    "read_strategy",
    "rollout_targets",
]

TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def _status_int(obj: Obj, field: str) -> int:
    return int(obj_at(obj, "status").get(field) or 0)


@dataclass(frozen=True)
class Strategy:
    kind: str  # "RollingUpdate" | "Recreate"
    max_surge: int
    max_unavailable: int


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    """An IntOrString of the strategy: a count, or a percentage of ``total``."""
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def read_strategy(deployment: Obj) -> Strategy:
    """``spec.strategy`` with apps/v1's defaults (RollingUpdate, 25% surge, 25% unavailable);
    surge rounds up, unavailability down, and both zero means one may be unavailable."""
    strategy = obj_at(deployment, "spec", "strategy")
    if strategy.get("type") == "Recreate":
        return Strategy("Recreate", 0, 0)
    rolling = obj_at(strategy, "rollingUpdate")
    desired = replicas_of(deployment)
    surge = _scaled(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return Strategy("RollingUpdate", surge, unavailable)


def _pruned(value: Any) -> Any:
    """``value`` without nulls and empty maps or lists, at any depth: how a Go client writes
    a template (``creationTimestamp: null``, ``resources: {}``) must not make it another."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def template_key(template: Any) -> Any:
    """A pod template as compared and hashed: pruned, without the pod-template-hash label."""
    out = _pruned(copy.deepcopy(as_dict(template)))
    labels = obj_at(out, "metadata", "labels")
    labels.pop(TEMPLATE_HASH, None)
    return _pruned(out)


def matches_template(replica_set: Obj, deployment: Obj) -> bool:
    """The ReplicaSet runs the Deployment's current pod template."""
    ours = template_key(obj_at(deployment, "spec").get("template"))
    return bool(ours == template_key(obj_at(replica_set, "spec").get("template")))


def revision_of(replica_set: Obj) -> int:
    try:
        return int(obj_at(replica_set, "metadata", "annotations").get(REVISION, 0))
    except ValueError:
        return 0


def new_replica_set(deployment: Obj, revision: int, replicas: int) -> Obj:
    """The ReplicaSet of the Deployment's current template: ``<deployment>-<hash>``, the hash
    in its selector and its pods' labels, the revision in its annotations."""
    spec = obj_at(deployment, "spec")
    meta = obj_at(deployment, "metadata")
    template = copy.deepcopy(obj_at(spec, "template"))
    collisions = int(obj_at(deployment, "status").get("collisionCount") or 0)
    digest = template_hash(template_key(template), collisions)
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**obj_at(tmeta, "labels"), TEMPLATE_HASH: digest}
    selector = copy.deepcopy(obj_at(spec, "selector"))
    selector["matchLabels"] = {**obj_at(selector, "matchLabels"), TEMPLATE_HASH: digest}
    strategy = read_strategy(deployment)
    annotations = {
        k: v for k, v in obj_at(meta, "annotations").items() if k != REVISION
        and not k.startswith("kubectl.kubernetes.io/last-applied")
    }  # fmt: skip
    annotations.update({
        DESIRED_REPLICAS: str(replicas_of(deployment)),
        MAX_REPLICAS: str(replicas_of(deployment) + strategy.max_surge),
        REVISION: str(revision),
    })  # fmt: skip
    rs_spec: Obj = {"replicas": replicas, "selector": selector, "template": template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{digest}",
            "namespace": meta.get("namespace") or "default",
            "labels": tmeta["labels"],
            "annotations": annotations,
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": rs_spec,
    }


def rollout_targets(
    deployment: Obj, new: Obj | None, olds: list[Obj], old_pods_active: int
) -> dict[str, int]:
    """Each ReplicaSet's next ``spec.replicas`` (by name; the new one under its name, or ""
    when it does not exist yet); ReplicaSets left out keep theirs.

    RollingUpdate: the new ReplicaSet grows while every ReplicaSet's pods together stay
    within replicas + maxSurge; old ones shrink while the available pods stay at least
    replicas - maxUnavailable (unhealthy old pods first). Recreate: old ones go to zero, and
    the new one grows only once no old pod is left.
    """
    desired = replicas_of(deployment)
    strategy = read_strategy(deployment)
    new_name = str(new["metadata"]["name"]) if new is not None else ""
    new_replicas = replicas_of(new) if new is not None else 0
    old_sorted = sorted(
        (o for o in olds if replicas_of(o) > 0),
        key=lambda o: str(obj_at(o, "metadata").get("creationTimestamp") or ""),
    )
    if strategy.kind == "Recreate":
        if old_sorted:
            return {str(o["metadata"]["name"]): 0 for o in old_sorted}
        if old_pods_active:
            return {}
        return {new_name: desired} if new_replicas != desired or new is None else {}
    if new_replicas > desired:
        return {new_name: desired}
    if not old_sorted:
        return {new_name: desired} if new_replicas != desired or new is None else {}
    total = new_replicas + sum(replicas_of(o) for o in old_sorted)
    if new_replicas < desired and total < desired + strategy.max_surge:
        # Scale up first; old ones go in a later step, once the new pods' states are known.
        return {
            new_name: new_replicas
            + min(desired + strategy.max_surge - total, desired - new_replicas)
        }
    if new is None:
        return {"": 0}
    min_available = desired - strategy.max_unavailable
    new_unavailable = new_replicas - _status_int(new, "availableReplicas")
    room = total - min_available - new_unavailable
    if room <= 0:
        return {}
    before = {str(o["metadata"]["name"]): replicas_of(o) for o in old_sorted}
    targets = dict(before)
    used = 0
    for old in old_sorted:  # unhealthy old pods first: they serve nobody
        name = str(old["metadata"]["name"])
        unhealthy = targets[name] - _status_int(old, "availableReplicas")
        if used >= room or unhealthy <= 0:
            continue
        down = min(room - used, unhealthy)
        targets[name] -= down
        used += down
    available = _status_int(new, "availableReplicas") + sum(
        _status_int(o, "availableReplicas") for o in old_sorted
    )
    more = available - min_available
    for old in old_sorted:
        name = str(old["metadata"]["name"])
        if more <= 0:
            break
        down = min(targets[name], more)
        targets[name] -= down
        more -= down
    return {n: v for n, v in targets.items() if v != before[n]}


def _condition(
    old: list[Any], type_: str, status: str, reason: str, message: str, now: str,
    *, touched: bool = False,
) -> Obj:  # fmt: skip
    """A DeploymentCondition; ``lastUpdateTime`` moves when the reason changes or
    ``touched`` (the rollout made progress), ``lastTransitionTime`` when the status flips."""
    prev = next((c for c in old if as_dict(c).get("type") == type_), None)
    same = prev is not None and prev.get("status") == status
    unchanged = same and prev is not None and prev.get("reason") == reason and not touched
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": str(prev.get("lastUpdateTime")) if unchanged and prev else now,
        "lastTransitionTime": str(prev.get("lastTransitionTime")) if same and prev else now,
        "reason": reason,
        "message": message,
    }


def deployment_status(
    deployment: Obj, new: Obj | None, olds: list[Obj], now: datetime, *, created: bool = False
) -> Obj:
    """The Deployment's status from its ReplicaSets (as the deployment controller derives
    it): counts, observedGeneration, and the Available and Progressing conditions."""
    every = ([new] if new is not None else []) + olds
    desired = replicas_of(deployment)
    available = sum(_status_int(rs, "availableReplicas") for rs in every)
    total_spec = sum(replicas_of(rs) for rs in every)
    status: Obj = {"observedGeneration": obj_at(deployment, "metadata").get("generation", 1)}
    counts = {
        "replicas": sum(_status_int(rs, "replicas") for rs in every),
        "updatedReplicas": _status_int(new, "replicas") if new is not None else 0,
        "readyReplicas": sum(_status_int(rs, "readyReplicas") for rs in every),
        "availableReplicas": available,
        "unavailableReplicas": max(total_spec - available, 0),
    }
    status.update({k: v for k, v in counts.items() if v})
    old = list_at(deployment, "status", "conditions")
    stamp = format_time(now)
    minimum = desired - read_strategy(deployment).max_unavailable
    if available >= minimum:
        avail = _condition(old, "Available", "True", "MinimumReplicasAvailable",
                           "Deployment has minimum availability.", stamp)  # fmt: skip
    else:
        avail = _condition(old, "Available", "False", "MinimumReplicasUnavailable",
                           "Deployment does not have minimum availability.", stamp)  # fmt: skip
    conditions = [avail]
    if new is not None:
        name = new["metadata"]["name"]
        complete = (
            counts["updatedReplicas"] == desired
            and counts["replicas"] == desired
            and available >= desired
            and _status_int(new, "observedGeneration")
            >= int(obj_at(new, "metadata").get("generation") or 0)
        )
        before = obj_at(deployment, "status")
        # What the deployment controller counts as progress: more updated, ready or
        # available pods, or fewer pods in all.
        moved = any(
            counts[k] > int(before.get(k) or 0)
            for k in ("updatedReplicas", "readyReplicas", "availableReplicas")
        ) or counts["replicas"] < int(before.get("replicas") or 0)
        prev: Obj = next((c for c in old if as_dict(c).get("type") == "Progressing"), {})
        deadline = obj_at(deployment, "spec").get("progressDeadlineSeconds")
        since = parse_time(prev.get("lastUpdateTime"))
        stalled = (
            not complete and not moved and not created and deadline is not None
            and since is not None and (now - since).total_seconds() > int(deadline)
        )  # fmt: skip
        if complete:
            cond = _condition(old, "Progressing", "True", "NewReplicaSetAvailable",
                              f'ReplicaSet "{name}" has successfully progressed.', stamp)  # fmt: skip
        elif stalled or (prev.get("reason") == "ProgressDeadlineExceeded" and not moved):
            cond = _condition(old, "Progressing", "False", "ProgressDeadlineExceeded",
                              f'ReplicaSet "{name}" has timed out progressing.', stamp)  # fmt: skip
        elif created:
            cond = _condition(old, "Progressing", "True", "NewReplicaSetCreated",
                              f'Created new replica set "{name}"', stamp)  # fmt: skip
        else:
            cond = _condition(old, "Progressing", "True", "ReplicaSetUpdated",
                              f'ReplicaSet "{name}" is progressing.', stamp, touched=moved)  # fmt: skip
        conditions.append(cond)
    status["conditions"] = conditions
    if obj_at(deployment, "status").get("collisionCount"):
        status["collisionCount"] = deployment["status"]["collisionCount"]
    return status


def _until_deadline(deployment: Obj, status: Obj, now: datetime) -> float | None:
    """Seconds until a rollout that is still progressing passes its progress deadline."""
    cond = next((c for c in dicts(status.get("conditions")) if c["type"] == "Progressing"), None)
    deadline = obj_at(deployment, "spec").get("progressDeadlineSeconds")
    if cond is None or deadline is None or cond["reason"] not in (
        "NewReplicaSetCreated", "ReplicaSetUpdated",
    ):  # fmt: skip
        return None
    since = parse_time(cond.get("lastUpdateTime")) or now
    return max((since - now).total_seconds() + int(deadline), 0.0) + 1.0


class DeploymentController(Controller):
    kind = DEPLOYMENT
    watches = (DEPLOYMENT, REPLICA_SET, POD)
    component = "deployment-controller"

    def keys_for(self, kind: Kind, etype: str, obj: Obj) -> list[Key]:
        if kind == POD:
            # A pod's ReplicaSet's Deployment (Recreate waits for old pods to be gone).
            ns = str(obj_at(obj, "metadata").get("namespace") or "")
            out = []
            for ref in list_at(obj, "metadata", "ownerReferences"):
                if as_dict(ref).get("controller") and ref.get("kind") == "ReplicaSet":
                    rs = self.shared.informers[REPLICA_SET].get(str(ref.get("name")), ns)
                    if rs is not None:
                        out += list(super().keys_for(REPLICA_SET, etype, rs))
            return out
        return list(super().keys_for(kind, etype, obj))

    async def reconcile(self, key: Key) -> float | None:
        deployment = self.get(key)
        if deployment is None or obj_at(deployment, "metadata").get("deletionTimestamp"):
            return None
        owned = owned_by(deployment, self.cached(REPLICA_SET, key[0]))
        new = next((rs for rs in owned if matches_template(rs, deployment)), None)
        olds = [rs for rs in owned if rs is not new]
        paused = bool(obj_at(deployment, "spec").get("paused"))
        created = False
        if not paused:
            old_uids = {str(o["metadata"].get("uid")) for o in olds}
            old_pods = sum(
                1 for p in self.cached(POD, key[0]) if is_active(p) and controller_uid(p) in old_uids
            )  # fmt: skip
            targets = rollout_targets(deployment, new, olds, old_pods)
            if new is None and "" in targets:
                revision = max((revision_of(rs) for rs in owned), default=0) + 1
                try:
                    new = await self.create(
                        REPLICA_SET, new_replica_set(deployment, revision, targets.pop(""))
                    )
                except ApiError as err:
                    if not err.conflict:
                        raise
                    # A ReplicaSet of that name that is not ours: the next name is another.
                    count = int(obj_at(deployment, "status").get("collisionCount") or 0)
                    status = {**obj_at(deployment, "status"), "collisionCount": count + 1}
                    await self.write_status(deployment, status)
                    return 0.0
                created = True
                self._scaled(deployment, new, 0, replicas_of(new))
            elif new is not None and revision_of(new) <= max(
                (revision_of(o) for o in olds), default=0
            ):
                # An old template came back (a rollback): its ReplicaSet is the newest revision.
                revision = max(revision_of(rs) for rs in owned) + 1
                new = await self.patch(
                    REPLICA_SET, new, {"metadata": {"annotations": {REVISION: str(revision)}}}
                )
            for rs in [*([new] if new is not None else []), *olds]:
                name = str(rs["metadata"]["name"])
                if name in targets and targets[name] != replicas_of(rs):
                    updated = await self.patch(
                        REPLICA_SET, rs, {"spec": {"replicas": targets[name]}}
                    )
                    self._scaled(deployment, rs, replicas_of(rs), targets[name])
                    if rs is new:
                        new = updated
                    else:
                        olds = [updated if o is rs else o for o in olds]
            await self._clean_history(deployment, olds)
        if new is not None and revision_of(new):
            rev = str(revision_of(new))
            annotations = obj_at(deployment, "metadata", "annotations")
            if annotations.get(REVISION) != rev:
                deployment = await self.patch(
                    DEPLOYMENT, deployment, {"metadata": {"annotations": {REVISION: rev}}}
                )
        status = deployment_status(deployment, new, olds, self.shared.clock(), created=created)
        await self.write_status(deployment, status)
        return _until_deadline(deployment, status, self.shared.clock())

    def _scaled(self, deployment: Obj, rs: Obj, before: int, after: int) -> None:
        verb = "up" if after > before else "down"
        self.event(deployment, "Normal", "ScalingReplicaSet",
                   f"Scaled {verb} replica set {rs['metadata']['name']} from {before} to {after}")  # fmt: skip

    async def _clean_history(self, deployment: Obj, olds: list[Obj]) -> None:
        """Old ReplicaSets beyond ``revisionHistoryLimit`` (default 10) with no pods left go."""
        limit = obj_at(deployment, "spec").get("revisionHistoryLimit")
        limit = 10 if limit is None else int(limit)
        idle = sorted(
            (o for o in olds if replicas_of(o) == 0 and _status_int(o, "replicas") == 0),
            key=revision_of,
        )
        for rs in idle[: max(len(idle) - limit, 0)]:
            await self.delete(REPLICA_SET, rs)
