"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of a workload's replica count.

``kubectl scale`` and autoscalers read and write ``<plural>/<name>/scale``; a write changes only
``spec.replicas`` of the workload (through the engine's ordinary update, so resourceVersion
preconditions and managed fields behave as for any other write).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.selectors import selector_text

__all__ = ["SCALE_API_VERSION", "replicas_of", "scale_of"]

SCALE_API_VERSION = "autoscaling/v1"


def scale_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Scale a workload shows: desired replicas, observed replicas and the pod selector."""
    meta = obj_at(obj, "metadata")
    spec = obj_at(obj, "spec")
    status = obj_at(obj, "status")
    selector = spec.get("selector")
    return {
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {
            "replicas": int(status.get("replicas") or 0),
            **({"selector": selector_text(selector)} if selector else {}),
        },
    }


def replicas_of(scale: Any, kind: str, name: str) -> int:
    """``spec.replicas`` of a Scale body, or 422 naming the field."""
    if not isinstance(scale, dict) or scale.get("kind", "Scale") != "Scale":
        raise E.bad_request("the body must be a Scale of autoscaling/v1")
    if scale.get("spec") is not None and not isinstance(scale["spec"], dict):
        raise E.bad_request("spec of the Scale must be an object")
    value = obj_at(scale, "spec").get("replicas", 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise E.invalid(
            "autoscaling",
            "Scale",
            name,
            [
                FieldError(
                    "spec.replicas",
                    f"Invalid value: {value!r}: must be greater than or equal to 0",
                )
            ],
        )
    return value
