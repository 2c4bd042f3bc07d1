"""The ``scale`` subresource of Deployments, ReplicaSets, StatefulSets and ReplicationControllers.

An ``autoscaling/v1`` Scale is a view of the object's ``spec.replicas`` and
``status.replicas``; writing one (PUT, or any patch ``kubectl scale`` sends) sets
``spec.replicas``. Pure: the HTTP layer reads and writes the object through the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.access import as_dict
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.patching import apply_json_patch, merge_patch

__all__ = ["scale_of", "scaled_replicas", "selector_text"]

JSON_PATCH = "application/json-patch+json"


def selector_text(obj: Mapping[str, Any]) -> str:
    """The label selector as a query string (``status.selector`` of a Scale)."""
    selector = as_dict(as_dict(obj.get("spec")).get("selector"))
    if obj.get("kind") == "ReplicationController":
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    parts = [f"{k}={v}" for k, v in sorted(as_dict(selector.get("matchLabels")).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale the object's ``scale`` subresource reads as."""
    meta = as_dict(obj.get("metadata"))
    spec_replicas = as_dict(obj.get("spec")).get("replicas")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": 1 if spec_replicas is None else spec_replicas},
        "status": {
            "replicas": int(as_dict(obj.get("status")).get("replicas") or 0),
            "selector": selector_text(obj),
        },
    }


def scaled_replicas(
    current: dict[str, Any], content_type: str | None, body: Any, *, name: str
) -> int:
    """``spec.replicas`` after a PUT (``content_type`` None) or a patch of the Scale."""
    if content_type is None:
        new = body
    elif content_type == JSON_PATCH:
        new = apply_json_patch(current, body)
    else:  # merge and strategic merge patches of a Scale are the same: no lists in it
        new = merge_patch(current, body)
    replicas = as_dict(as_dict(new).get("spec")).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        why = "must be greater than or equal to 0"
        raise E.invalid("autoscaling", "Scale", name, [FieldError("spec.replicas", why)])
    return replicas
