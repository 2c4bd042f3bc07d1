"""Pod resource requests and PodGroup totals, computed the way Kubernetes and upstream do (trainer v2.3.0 pkg/runtime/runtime.go).

A PodGroup (coscheduling or volcano) carries ``minMember`` = the number of pods of every PodSet
(initializers, launcher, nodes) and ``minResources`` = the sum of one pod's requests times that
PodSet's count. One pod's requests follow Kubernetes' resource helpers (``PodRequests``):

- a container requests ``resources.requests`` (only: the runtime's pod template never went
  through the API server's limits-to-requests defaulting, so a resource that is only limited
  counts as not requested, exactly as upstream computes it);
- the regular containers add up; sidecars (init containers with ``restartPolicy: Always``) add to
  that too; each ordinary init container needs its own requests plus the sidecars started before
  it; the pod needs the larger of the two, per resource;
- pod-level ``spec.resources.requests`` (cpu, memory) replace the containers' sum;
- ``spec.overhead`` is added on top.

Quantities come from :mod:`kubetrain.api.quantity` (exact values, canonical printing such as
``1500m``, ``512Mi``, ``2``); the sums here follow ``resource.Quantity``'s rule for which format
a sum keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.podresources import (
    add_into,
    add_quantities,
    container_requests,
    pod_requests,
    scale_quantity,
)
from kubetrain.api.quantity import Quantity
from kubetrain.runtime.framework import RenderError
from kubetrain.runtime.info import RuntimeInfo

__all__ = [
    "add_quantities",
    "container_requests",
    "gang_totals",
    "pod_group_totals",
    "pod_requests",
    "scale_quantity",
]

Obj = dict[str, Any]


def pod_group_totals(pod_sets: Iterable[tuple[int, Obj]]) -> tuple[int, dict[str, str]]:
    """``(minMember, minResources)`` over ``(count, pod spec)`` pairs, in PodSet order.

    ``minResources`` maps each resource name (sorted, as Go marshals maps) to its canonical
    quantity string.
    """
    members = 0
    totals: dict[str, Quantity] = {}
    for count, pod_spec in pod_sets:
        members += count
        add_into(
            totals, {name: scale_quantity(q, count) for name, q in pod_requests(pod_spec).items()}
        )
    return members, {name: str(totals[name]) for name in sorted(totals)}


def gang_totals(info: RuntimeInfo) -> tuple[int, dict[str, str]]:
    """``(minMember, minResources)`` over every PodSet of ``info``.

    Counts are the PodSets' final counts; requests come from each pod as it was before the
    plugins edited it (``PodSet.base_pod_spec``), which is what upstream's PodSets carry.
    """
    try:
        return pod_group_totals(
            (ps.count, ps.base_pod_spec if ps.base_pod_spec is not None else ps.pod_spec)
            for ps in info.pod_sets
        )
    except ValueError as exc:  # a malformed quantity that validation would have reported
        raise RenderError(
            FieldError("", f"cannot sum pod requests for the PodGroup: {exc}")
        ) from exc
