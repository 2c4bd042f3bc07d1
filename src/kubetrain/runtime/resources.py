"""GPU and CPU arithmetic on ``resourcesPerNode`` (reference §3, "GPU/CPU helpers").

- GPU count: the first resource whose name contains "gpu" (case-insensitive) in ``requests``;
  if that is 0, the same in ``limits``. Value() semantics: rounded *up* to an integer.
- CPU count: ``requests.cpu`` unless absent or zero, else ``limits.cpu``; rounded up
  (``500m`` -> 1).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["cpu_count", "gpu_count", "quantity_value"]

# TODO(H1): replace with kubetrain.api.quantity once it lands (same Value() rounding).
_SUFFIX = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def _parse(q: Any) -> Decimal:
    if isinstance(q, bool):
        return Decimal(0)
    if isinstance(q, int | float):
        return Decimal(str(q))
    if not isinstance(q, str):
        return Decimal(0)
    text = q.strip()
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix) and not (suffix == "E" and "e" in text.lower()[:-1]):
            try:
                return Decimal(text[: -len(suffix)]) * _SUFFIX[suffix]
            except InvalidOperation:
                return Decimal(0)
    try:
        return Decimal(text)
    except InvalidOperation:
        return Decimal(0)


def quantity_value(q: Any) -> int:
    """Kubernetes ``Quantity.Value()``: the value rounded up to an integer; junk counts as 0."""
    value = _parse(q)
    if not value.is_finite():
        return 0
    return math.ceil(value)


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
