"""A Service's endpoints: the pod IPs its name resolves to on the pod network. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .cache import key_of

__all__ = ["service_endpoints"]

Obj = dict[str, Any]


def service_endpoints(service: Obj, pods: Iterable[Obj]) -> list[str]:
    """The pod IPs a Service's name resolves to: pods of its namespace matching its selector
    that are ready (or any, with ``publishNotReadyAddresses``), as EndpointSlices list them."""
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    if not selector:
        return []  # endpoints managed by hand: none here
    ns = key_of(service)[0]
    everyone = bool(spec.get("publishNotReadyAddresses"))
    out = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        status = pod.get("status") or {}
        if key_of(pod)[0] != ns or any(labels.get(k) != v for k, v in selector.items()):
            continue
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if status.get("podIP") and (ready or everyone) and status.get("phase") == "Running":
            out.append(str(status["podIP"]))
    return sorted(out)
