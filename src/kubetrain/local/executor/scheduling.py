"""Does a pod fit on this machine's node? The kube-scheduler's resource fit, as pure functions.

A pod's request is what kube-scheduler counts (`pod_requests`). A pod fits when its
request plus the requests of the pods already running stay within the node's allocatable
cpu, memory and ``nvidia.com/gpu``; otherwise it stays Pending with the scheduler's
``FailedScheduling`` message, until enough is freed. GPUs go to pods as whole devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.podresources import pod_requests as podgroup_requests
from kubetrain.api.quantity import quantity_milli_value, quantity_value

__all__ = [
    "GPU",
    "Resources",
    "assign_gpus",
    "insufficient",
    "pod_requests",
    "resources_of",
    "unschedulable_message",
]

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Resources:
    cpu_millis: int = 0
    memory: int = 0
    gpus: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis + other.cpu_millis, self.memory + other.memory, self.gpus + other.gpus
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu_millis, other.cpu_millis),
            max(self.memory, other.memory),
            max(self.gpus, other.gpus),
        )

    def as_quantities(self) -> dict[str, str]:
        """The Node's ``allocatable`` form."""
        return {"cpu": f"{self.cpu_millis}m", "memory": str(self.memory), GPU: str(self.gpus)}


def resources_of(values: Mapping[str, Any]) -> Resources:
    """``{cpu: "500m", memory: "1Gi", nvidia.com/gpu: 1}`` → Resources (absent: 0)."""
    cpu, memory, gpu = values.get("cpu"), values.get("memory"), values.get(GPU)
    return Resources(
        quantity_milli_value(cpu) if cpu is not None else 0,
        quantity_value(memory) if memory is not None else 0,
        quantity_value(gpu) if gpu is not None else 0,
    )


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What kube-scheduler counts for ``pod``: `kubetrain.api.podresources.pod_requests`
    (Kubernetes' PodRequests helper) over the pod as the API server stored it, where a limit
    stands in for a missing request."""
    requests = podgroup_requests(dict(obj_at(pod, "spec")), limits_as_requests=True)
    return resources_of(requests)


def insufficient(request: Resources, allocatable: Resources, used: Resources) -> list[str]:
    """The resources the node lacks for ``request`` beside ``used``, in the scheduler's order."""
    out = []
    if request.cpu_millis and used.cpu_millis + request.cpu_millis > allocatable.cpu_millis:
        out.append("cpu")
    if request.memory and used.memory + request.memory > allocatable.memory:
        out.append("memory")
    if request.gpus and used.gpus + request.gpus > allocatable.gpus:
        out.append(GPU)
    return out


def unschedulable_message(lacking: Iterable[str]) -> str:
    """kube-scheduler's FailedScheduling message for a one-node cluster."""
    reasons = ", ".join(f"1 Insufficient {name}" for name in lacking)
    return (
        f"0/1 nodes are available: {reasons}. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )


def assign_gpus(count: int, total: int, taken: Iterable[int]) -> tuple[int, ...] | None:
    """The lowest ``count`` device indices of ``total`` not in ``taken``; None if too few."""
    busy = set(taken)
    free: Sequence[int] = [i for i in range(total) if i not in busy]
    return tuple(free[:count]) if len(free) >= count else None
