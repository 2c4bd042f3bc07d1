"""Quantities in a rendered JobSet, written the way upstream's Go types write them.

Upstream's JobSet passes through typed Go structs, so every ``resource.Quantity`` comes out in
canonical form: the official SDK's ``cpu: 2.0`` becomes ``"2"``, ``nvidia.com/gpu: 1.0`` becomes
``"1"``, ``0.5`` becomes ``"500m"``. Values that are not quantities are left alone (validation
reports them).
"""

from __future__ import annotations

import contextlib
from typing import Any

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.quantity import canonical_quantity
from kubetrain.runtime.podspec import Obj

__all__ = ["canonicalize_jobset", "canonicalize_pod_spec", "canonicalize_resource_list"]


def canonicalize_resource_list(resources: Any) -> None:
    """In place: every value of a ResourceList dict."""
    if not isinstance(resources, dict):
        return
    for k, v in resources.items():
        if isinstance(v, str | int | float) and not isinstance(v, bool):
            resources[k] = _canonical(v)


# The same few quantities recur in every render; formatting them is the expensive part.
_MEMO: dict[tuple[type, str | int | float], str | int | float] = {}


def _canonical(v: str | int | float) -> str | int | float:
    key = (type(v), v)
    out = _MEMO.get(key)
    if out is None:
        out = v
        with contextlib.suppress(ValueError):  # not a quantity: left for validation to report
            out = canonical_quantity(v)
        if len(_MEMO) < 4096:
            _MEMO[key] = out
    return out


def _requirements(res: Any) -> None:
    if isinstance(res, dict):
        canonicalize_resource_list(res.get("limits"))
        canonicalize_resource_list(res.get("requests"))


def canonicalize_pod_spec(pod: Any) -> None:
    """In place: container/init-container resources, overhead, emptyDir size limits."""
    if not isinstance(pod, dict):
        return
    for key in ("containers", "initContainers"):
        for c in list_at(pod, key):
            if isinstance(c, dict) and "resources" in c:
                _requirements(c["resources"])
    if "overhead" in pod:
        canonicalize_resource_list(pod["overhead"])
    if "resources" in pod:
        _requirements(pod["resources"])
    for v in list_at(pod, "volumes"):
        if (
            isinstance(v, dict)
            and isinstance(v.get("emptyDir"), dict)
            and "sizeLimit" in v["emptyDir"]
        ):
            limit = {"sizeLimit": v["emptyDir"]["sizeLimit"]}
            canonicalize_resource_list(limit)
            v["emptyDir"]["sizeLimit"] = limit["sizeLimit"]


def canonicalize_jobset(jobset: Obj) -> None:
    """In place, over every pod template and volume claim template of a JobSet."""
    spec = jobset.get("spec")
    if not isinstance(spec, dict):
        return
    for rjob in list_at(spec, "replicatedJobs"):
        if not isinstance(rjob, dict):
            continue
        pod = obj_at(rjob, "template", "spec", "template").get("spec")
        canonicalize_pod_spec(pod)
    for policy in list_at(spec, "volumeClaimPolicies"):
        if isinstance(policy, dict):
            for t in list_at(policy, "templates"):
                if isinstance(t, dict) and isinstance(t.get("spec"), dict):
                    _requirements(t["spec"].get("resources"))
