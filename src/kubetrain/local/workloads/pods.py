"""What every workload controller asks of pods and owners. Pure.

Label selectors (``matchLabels`` + ``matchExpressions``), controller references, pods built from
a template the way the controllers name and label them, and which pods count as active, ready
and available. The pod predicates themselves are the executor's (`executor.jobs`): one place.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from kubetrain.api.access import as_dict, as_list, list_at, obj_at
from kubetrain.api.core import OwnerReference
from kubetrain.api.meta import find_condition, parse_time
from kubetrain.local.executor.jobs import is_deleting, is_ready, is_terminal

__all__ = [
    "controller_uid",
    "is_active",
    "is_available",
    "is_ready",
    "owned_by",
    "owner_reference",
    "pod_from_template",
    "replicas_of",
    "selector_matches",
    "template_hash",
]

Obj = dict[str, Any]

# The alphabet Kubernetes' rand.SafeEncodeString uses: no vowels, no look-alikes.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def selector_matches(selector: Any, labels: Any) -> bool:
    """Whether ``labels`` satisfy a metav1.LabelSelector (an empty selector matches all;
    a missing one, ``None``, matches nothing, as for a ReplicaSet without one)."""
    if selector is None:
        return False
    sel, have = as_dict(selector), as_dict(labels)
    for key, value in obj_at(sel, "matchLabels").items():
        if have.get(key) != value:
            return False
    for expr in as_list(sel.get("matchExpressions")):
        key, op = str(as_dict(expr).get("key")), as_dict(expr).get("operator")
        values = [str(v) for v in as_list(as_dict(expr).get("values"))]
        if op == "In" and have.get(key) not in values:
            return False
        if op == "NotIn" and have.get(key) in values:
            return False
        if op == "Exists" and key not in have:
            return False
        if op == "DoesNotExist" and key in have:
            return False
    return True


def rc_selector(selector: Any) -> Obj:
    """A ReplicationController's plain map selector as a LabelSelector."""
    return {"matchLabels": as_dict(selector)}


def owner_reference(owner: Obj) -> OwnerReference:
    """The controller reference a controller puts on what it creates."""
    meta = obj_at(owner, "metadata")
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controller (the ownerReference with ``controller: true``)."""
    for ref in list_at(obj, "metadata", "ownerReferences"):
        if as_dict(ref).get("controller"):
            return str(ref.get("uid"))
    return None


def owned_by(owner: Obj, objs: Any) -> list[Obj]:
    """The objects of ``objs`` the owner controls, in the owner's namespace."""
    meta = obj_at(owner, "metadata")
    uid, ns = str(meta.get("uid")), meta.get("namespace")
    return [
        o for o in objs if controller_uid(o) == uid and obj_at(o, "metadata").get("namespace") == ns
    ]


def replicas_of(obj: Obj) -> int:
    """``spec.replicas`` with the API's default of 1."""
    value = obj_at(obj, "spec").get("replicas")
    return 1 if value is None else int(value)


def is_active(pod: Obj) -> bool:
    """Counted by its controller: neither ended nor being deleted."""
    return not is_terminal(pod) and not is_deleting(pod)


def is_available(pod: Obj, min_ready_seconds: int, now: datetime) -> bool:
    """Ready for at least ``minReadySeconds``."""
    if not is_active(pod) or not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    cond = find_condition(list_at(pod, "status", "conditions"), "Ready") or {}
    since = parse_time(cond.get("lastTransitionTime"))
    return since is not None and since + timedelta(seconds=min_ready_seconds) <= now


def template_hash(template: Any, collision_count: int = 0) -> str:
    """The ``pod-template-hash`` of a pod template: stable for equal templates, in the
    alphabet Kubernetes uses for it (10 characters)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":")) + f"/{collision_count}"
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(10):
        number, digit = divmod(number, len(_SAFE))
        out.append(_SAFE[digit])
    return "".join(out)


def pod_from_template(
    owner: Obj,
    template: Any,
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    spec: Obj | None = None,
) -> Obj:
    """A Pod the owner creates from its template: ``<owner>-<random>`` (``generateName``)
    unless named, the template's labels and annotations, a controller reference."""
    tmpl = as_dict(template)
    tmeta = obj_at(tmpl, "metadata")
    meta: Obj = {
        "namespace": obj_at(owner, "metadata").get("namespace") or "default",
        "labels": {**obj_at(tmeta, "labels"), **(labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    if tmeta.get("annotations"):
        meta["annotations"] = copy.deepcopy(tmeta["annotations"])
    pod_spec = copy.deepcopy(obj_at(tmpl, "spec"))
    pod_spec.update(spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
