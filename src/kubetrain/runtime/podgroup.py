"""Pod resource requests and PodGroup totals, computed the way Kubernetes and upstream do (§5).

A PodGroup (coscheduling or volcano) carries ``minMember`` = the number of pods of every PodSet
(initializers, launcher, nodes) and ``minResources`` = the sum of one pod's requests times that
PodSet's count. One pod's requests follow Kubernetes' resource helpers (``PodRequests``):

- a container requests ``resources.requests``; a resource it only limits requests its limit
  (the API server's defaulting, which upstream's pods have been through);
- the regular containers add up; sidecars (init containers with ``restartPolicy: Always``) add to
  that too; each ordinary init container needs its own requests plus the sidecars started before
  it; the pod needs the larger of the two, per resource;
- ``spec.overhead`` is added on top.

Quantities come from :mod:`kubetrain.api.quantity` (exact values, canonical printing such as
``1500m``, ``512Mi``, ``2``); the sums here follow ``resource.Quantity``'s rule for which format
a sum keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetrain.api.quantity import Quantity, parse_quantity

__all__ = [
    "add_quantities",
    "container_requests",
    "pod_group_totals",
    "pod_requests",
    "scale_quantity",
]

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


def container_requests(container: Obj) -> dict[str, Quantity]:
    """A container's requests, with a limit standing in for each request it does not state."""
    resources = container.get("resources") or {}
    requests = _resource_list(resources.get("requests"))
    for name, limit in _resource_list(resources.get("limits")).items():
        requests.setdefault(name, limit)
    return requests


def _add_into(total: dict[str, Quantity], extra: Mapping[str, Quantity]) -> None:
    for name, q in extra.items():
        total[name] = add_quantities(total[name], q) if name in total else q


def _max_into(total: dict[str, Quantity], other: Mapping[str, Quantity]) -> None:
    for name, q in other.items():
        if name not in total or q.value > total[name].value:
            total[name] = q


def pod_requests(pod_spec: Obj) -> dict[str, Quantity]:
    """One pod's effective requests (Kubernetes ``resourcehelpers.PodRequests``, no options)."""
    requests: dict[str, Quantity] = {}
    for container in pod_spec.get("containers") or []:
        _add_into(requests, container_requests(container))
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for container in pod_spec.get("initContainers") or []:
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            # A sidecar keeps running next to the main containers, so it adds to them...
            _add_into(requests, own)
            _add_into(sidecars, own)
            needed = dict(sidecars)
        else:
            # ...while an ordinary init container runs alone with the sidecars started so far.
            needed = dict(own)
            _add_into(needed, sidecars)
        _max_into(init_peak, needed)
    _max_into(requests, init_peak)
    _add_into(requests, _resource_list(pod_spec.get("overhead")))
    return requests


def pod_group_totals(pod_sets: Iterable[tuple[int, Obj]]) -> tuple[int, dict[str, str]]:
    """``(minMember, minResources)`` over ``(count, pod spec)`` pairs, in PodSet order.

    ``minResources`` maps each resource name (sorted, as Go marshals maps) to its canonical
    quantity string.
    """
    members = 0
    totals: dict[str, Quantity] = {}
    for count, pod_spec in pod_sets:
        members += count
        _add_into(
            totals, {name: scale_quantity(q, count) for name, q in pod_requests(pod_spec).items()}
        )
    return members, {name: str(totals[name]) for name in sorted(totals)}
