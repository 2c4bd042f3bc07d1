"""One pod's resource requests, computed as Kubernetes' resource helpers (``PodRequests``) do.

Shape-level arithmetic over the core/v1 Pod spec, shared by the runtime (PodGroup totals,
`kubetrain.runtime.podgroup`) and the local engine's scheduler (does a pod fit the node).

- a container requests ``resources.requests`` (with ``limits_as_requests``, a limit stands in
  for a missing request, as the API server's defaulting does to a real Pod);
- the regular containers add up; sidecars (init containers with ``restartPolicy: Always``) add to
  that too; each ordinary init container needs its own requests plus the sidecars started before
  it; the pod needs the larger of the two, per resource;
- pod-level ``spec.resources.requests`` (cpu, memory) replace the containers' sum;
- ``spec.overhead`` is added on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.quantity import Quantity, parse_quantity

__all__ = ["add_into", "add_quantities", "container_requests", "pod_requests", "scale_quantity"]

Obj = dict[str, Any]


def add_quantities(a: Quantity, b: Quantity) -> Quantity:
    """``a.Add(b)`` of Go's ``resource.Quantity``: exact, and a zero ``a`` adopts ``b``'s format.

    The format decides how the sum prints (``1Gi + 1Gi`` is ``2Gi``, ``1G + 1Gi`` is
    ``2073741824``), so the order of the terms matters exactly as it does upstream.
    """
    return Quantity(a.value + b.value, b.format if a.value == 0 else a.format)


def scale_quantity(q: Quantity, factor: int) -> Quantity:
    """``q.Mul(factor)``: the format is kept."""
    return Quantity(q.value * factor, q.format)


# --- pod requests ------------------------------------------------------------------------------


def _resource_list(raw: Any) -> dict[str, Quantity]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): parse_quantity(q) for name, q in raw.items() if q is not None}


def container_requests(
    container: Mapping[str, Any], *, limits_as_requests: bool = False
) -> dict[str, Quantity]:
    """A container's ``resources.requests``.

    With ``limits_as_requests`` a limit stands in for each request the container does not
    state, which is what the API server's defaulting does to a real Pod. Upstream computes
    PodGroups from the runtime's pod *template*, which is never defaulted, so it is off there.
    """
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    requests = _resource_list(resources.get("requests"))
    if limits_as_requests:
        for name, limit in _resource_list(resources.get("limits")).items():
            requests.setdefault(name, limit)
    return requests


def add_into(total: dict[str, Quantity], extra: Mapping[str, Quantity]) -> None:
    """``total += extra``, per resource, in ``add_quantities``' format rule."""
    for name, q in extra.items():
        total[name] = add_quantities(total[name], q) if name in total else q


def _max_into(total: dict[str, Quantity], other: Mapping[str, Quantity]) -> None:
    for name, q in other.items():
        if name not in total or q.value > total[name].value:
            total[name] = q


# Resources a pod-level ``spec.resources`` may set (Kubernetes' PodLevelResources).
_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def pod_requests(pod_spec: Obj, *, limits_as_requests: bool = False) -> dict[str, Quantity]:
    """One pod's effective requests (Kubernetes ``resourcehelpers.PodRequests``, no options).

    Pod-level ``spec.resources.requests`` for cpu and memory replace the containers' sum, as
    the helper does when pod-level resources are set. ``limits_as_requests``: see
    :func:`container_requests`.
    """
    requests: dict[str, Quantity] = {}
    for container in pod_spec.get("containers") or []:
        if isinstance(container, Mapping):
            add_into(requests, container_requests(container, limits_as_requests=limits_as_requests))
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for container in pod_spec.get("initContainers") or []:
        if not isinstance(container, Mapping):
            continue
        own = container_requests(container, limits_as_requests=limits_as_requests)
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running next to the main containers, so it adds to them...
            add_into(requests, own)
            add_into(sidecars, own)
            needed = dict(sidecars)
        else:
            # ...while an ordinary init container runs alone with the sidecars started so far.
            needed = dict(own)
            add_into(needed, sidecars)
        _max_into(init_peak, needed)
    _max_into(requests, init_peak)
    pod_level = pod_spec.get("resources")
    if isinstance(pod_level, Mapping):
        for name, q in _resource_list(pod_level.get("requests")).items():
            if name in _POD_LEVEL_RESOURCES:
                requests[name] = q
    add_into(requests, _resource_list(pod_spec.get("overhead")))
    return requests
