"""GPU and CPU arithmetic on ``resourcesPerNode`` (trainer v2.3.0 pkg/runtime/runtime.go, "GPU/CPU helpers").

- GPU count: the first resource whose name contains "gpu" (case-insensitive) in ``requests``;
  if that is 0, the same in ``limits``. Value() semantics: rounded *up* to an integer.
- CPU count: ``requests.cpu`` unless absent or zero, else ``limits.cpu``; rounded up
  (``500m`` -> 1).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubetrain.api.quantity import parse_quantity

__all__ = ["cpu_count", "gpu_count", "quantity_value"]


def _parse(q: Any) -> Fraction:
    try:
        return parse_quantity(q).value
    except ValueError:
        return Fraction(0)


def quantity_value(q: Any) -> int:
    """Kubernetes ``Quantity.Value()``: the value rounded up to an integer; junk counts as 0."""
    try:
        return parse_quantity(q).value_int()
    except ValueError:
        return 0


def _gpu(resource_list: Any) -> int:
    if isinstance(resource_list, dict):
        for name, q in resource_list.items():
            if "gpu" in str(name).lower():
                return quantity_value(q)
    return 0


def gpu_count(resources: Any) -> int:
    """GPUs per node from a ResourceRequirements dict."""
    if not isinstance(resources, dict):
        return 0
    n = _gpu(resources.get("requests"))
    if n == 0:
        limit = _gpu(resources.get("limits"))
        if limit > 0:
            n = limit
    return n


def cpu_count(resources: Any) -> int:
    """CPUs per node from a ResourceRequirements dict (0 when unknown)."""
    if not isinstance(resources, dict):
        return 0
    requests = resources.get("requests")
    if (
        isinstance(requests, dict)
        and requests.get("cpu") is not None
        and _parse(requests["cpu"]) != 0
    ):
        return quantity_value(requests["cpu"])
    limits = resources.get("limits")
    if isinstance(limits, dict) and limits.get("cpu") is not None:
        return quantity_value(limits["cpu"])
    return 0
