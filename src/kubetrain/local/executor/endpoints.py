"""A Service's endpoints: the pod IPs its name resolves to on the pod network. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubetrain.api.access import dicts, obj_at

from .cache import key_of

__all__ = ["service_endpoints"]

Obj = dict[str, Any]


def service_endpoints(service: Obj, pods: Iterable[Obj]) -> list[str]:
    """The pod IPs a Service's name resolves to: pods of its namespace matching its selector
    that are ready (or any, with ``publishNotReadyAddresses``), as EndpointSlices list them."""
    spec = obj_at(service, "spec")
    selector = obj_at(spec, "selector")
    if not selector:
        return []  # endpoints managed by hand: none here
    ns = key_of(service)[0]
    everyone = bool(spec.get("publishNotReadyAddresses"))
    out = []
    for pod in pods:
        labels = obj_at(pod, "metadata", "labels")
        status = obj_at(pod, "status")
        if key_of(pod)[0] != ns or any(labels.get(k) != v for k, v in selector.items()):
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in dicts(status.get("conditions"))
        )
        if status.get("podIP") and (ready or everyone) and status.get("phase") == "Running":
            out.append(str(status["podIP"]))
    return sorted(out)
