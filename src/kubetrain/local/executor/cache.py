"""What the executor knows of the cluster: the watched JobSets and Pods, plus the pods that
exist only here (still stopping after their API object went, or lost to an outside delete).

A pod deleted through the API disappears at once from the embedded API server while its
processes may still be stopping: such pods are shown to the JobSet logic as terminating, so a
restarted Job never runs beside the remains of its predecessor (a cluster keeps the terminating
Pod object for the same reason).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.api.labels import JOBSET_NAME_LABEL, RESTART_ATTEMPT_LABEL
from kubetrain.api.meta import format_time, now

__all__ = ["Cluster", "Key", "jobset_key_of", "keep_answer", "keep_newest", "key_of", "rv_of"]

Key = tuple[str, str]  # (namespace, name)
Obj = dict[str, Any]


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj_at(obj, "metadata")
    return str(meta.get("namespace") or "default"), str(meta.get("name", ""))


def jobset_key_of(pod: Mapping[str, Any]) -> Key | None:
    meta = obj_at(pod, "metadata")
    name = obj_at(meta, "labels").get(JOBSET_NAME_LABEL)
    return (str(meta.get("namespace") or "default"), str(name)) if name else None


def rv_of(obj: Mapping[str, Any]) -> int:
    try:
        return int(obj_at(obj, "metadata").get("resourceVersion") or 0)
    except ValueError:
        return 0


def _uid(obj: Mapping[str, Any]) -> object:
    return obj_at(obj, "metadata").get("uid")


# Watch events and the answers to this executor's own writes arrive on different connections,
# in either order: an answer read after the event of a later change (or of the deletion) must
# not put the older state back, or the change is never acted on.
def keep_newest(table: dict[Key, Obj], obj: Obj) -> bool:
    """A watched object: stored unless ``table`` already holds the same object (uid) at a later
    resourceVersion. Whether it was stored."""
    key = key_of(obj)
    cached = table.get(key)
    if cached is not None and _uid(cached) == _uid(obj) and rv_of(cached) > rv_of(obj):
        return False
    table[key] = obj
    return True


def keep_answer(table: dict[Key, Obj], obj: Obj) -> None:
    """The answer to a write of an object already watched: it replaces only the same object
    (uid) at an earlier resourceVersion. None or another uid under the name means its deletion
    or a namesake was seen meanwhile."""
    key = key_of(obj)
    cached = table.get(key)
    if cached is not None and _uid(cached) == _uid(obj) and rv_of(cached) < rv_of(obj):
        table[key] = obj


# The restart attempt an earlier namesake JobSet's pods are shown under: never a current one.
_EARLIER_JOBSET = "-1"


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    """Whether ``pod`` belongs to the JobSet of ``uid`` (a pod without owners is taken as
    the JobSet's own)."""
    owners = [r.get("uid") for r in dicts(pod["metadata"].get("ownerReferences"))]
    return not (uid and owners and uid not in owners)


@dataclass
class Cluster:
    jobsets: dict[Key, Obj] = field(default_factory=dict)
    pods: dict[Key, Obj] = field(default_factory=dict)
    # Services, for the names pods resolve on the pod network.
    services: dict[Key, Obj] = field(default_factory=dict)
    # Pods deleted from the API whose processes are still stopping: uid → last object.
    terminating: dict[str, Obj] = field(default_factory=dict)
    # Pods this executor deleted itself (restart, suspend, finish): their end is no failure.
    own_deletions: set[str] = field(default_factory=set)
    # Pods deleted by someone else before they ended. The Job controller counts such a pod as
    # failed (job tracking finalizers); with no Job objects the count lives here, per JobSet
    # uid, as a Failed stand-in for the vanished pod. Kept in memory only.
    lost: dict[str, list[Obj]] = field(default_factory=dict)

    def jobset_of(self, pod: Mapping[str, Any]) -> Obj | None:
        key = jobset_key_of(pod)
        return self.jobsets.get(key) if key else None

    def pods_of(self, jobset: Obj) -> list[Obj]:
        """Every pod the JobSet logic must see: live ones, stopping ones, lost ones."""
        key = key_of(jobset)
        uid = str(jobset["metadata"].get("uid", ""))
        out = []
        seen = set()
        for pod in self.pods.values():
            if jobset_key_of(pod) != key:
                continue
            if not _owned_by(pod, uid):
                continue  # a pod of an earlier JobSet of the same name
            seen.add(pod["metadata"].get("uid"))
            out.append(pod)
        attempt = str(int(obj_at(jobset, "status").get("restarts") or 0))
        # Only the current restart attempt's Jobs count lost pods; older Jobs are gone.
        out += [
            g
            for g in self.lost.get(uid, [])
            if g["metadata"]["labels"].get(RESTART_ATTEMPT_LABEL) == attempt
        ]
        for pod_uid, pod in self.terminating.items():
            if pod_uid not in seen and jobset_key_of(pod) == key:
                ghost = copy.deepcopy(pod)
                ghost["metadata"].setdefault("deletionTimestamp", format_time(now()))
                if not _owned_by(pod, uid):
                    # An earlier JobSet of the same name, still stopping: its pods are
                    # remains of a previous attempt to this one, which block the Jobs of
                    # their names (as the old Job objects would on a cluster) and never
                    # count as this JobSet's successes or failures.
                    labels = ghost["metadata"].setdefault("labels", {})
                    labels[RESTART_ATTEMPT_LABEL] = _EARLIER_JOBSET
                out.append(ghost)
        return out

    def record_loss(self, pod: Obj) -> None:
        """A pod deleted from outside before it ended counts as a failed pod of its Job."""
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        if uid in self.own_deletions or obj_at(pod, "status").get("phase") in (
            "Succeeded",
            "Failed",
        ):
            self.own_deletions.discard(uid)
            return
        jobset = self.jobset_of(pod)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return  # deleted with its JobSet: nothing left to count against
        stamp = format_time(now())
        ghost = copy.deepcopy(pod)
        ghost["metadata"]["deletionTimestamp"] = stamp
        ghost["status"] = {
            "phase": "Failed",
            "reason": "Deleted",
            "containerStatuses": [
                {
                    "name": str(c.get("name")),
                    "state": {
                        "terminated": {"exitCode": 137, "reason": "Error", "finishedAt": stamp}
                    },
                }
                for c in dicts(obj_at(pod, "spec").get("containers"))
            ],
        }
        self.lost.setdefault(str(jobset["metadata"].get("uid")), []).append(ghost)
