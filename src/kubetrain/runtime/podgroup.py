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

Quantities are exact decimals and print in Kubernetes' canonical form (``1500m``, ``512Mi``,
``2``), with ``resource.Quantity``'s rules for which format a sum keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_UP, Decimal, InvalidOperation
from typing import Any, Literal

__all__ = [
    "Quantity",
    "container_requests",
    "cpu_count",
    "gpu_count",
    "parse_quantity",
    "pod_group_totals",
    "pod_requests",
]

Obj = dict[str, Any]
Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

# TODO(kubetrain.api.quantity): switch parsing to the API layer's parser once it lands; the
# arithmetic and the format bookkeeping below are what PodGroup totals need on top of it.

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {e: s for s, e in _DECIMAL.items()}
_BINARY_BY_EXP = {0: "", **{e // 10: s for s, e in _BINARY.items()}}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z]*|[eE][+-]?[0-9]+)$")
_NANO = Decimal("1e-9")


@dataclass(frozen=True, slots=True)
class Quantity:
    """A Kubernetes ``resource.Quantity``: an exact value and the format it prints in."""

    value: Decimal
    format: Format = "DecimalSI"

    def __add__(self, other: Quantity) -> Quantity:
        # resource.Quantity.Add: a zero receiver adopts the other's format, else keeps its own.
        fmt = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, fmt)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity(self.value * factor, self.format)

    def __str__(self) -> str:
        return self.canonical()

    def to_int(self) -> int:
        """``Quantity.Value()``: the value rounded up to an integer (``500m`` → 1)."""
        return int(self.value.to_integral_value(rounding=ROUND_CEILING))

    def canonical(self) -> str:
        """``Quantity.String()``: the shortest exact form in this quantity's format."""
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt == "BinarySI":
            # Small or fractional binary values print as decimal so nothing is rounded away.
            if -1024 < self.value < 1024 or self.value != self.value.to_integral_value():
                fmt = "DecimalSI"
            else:
                mantissa, exp = int(self.value), 0
                while mantissa % 1024 == 0 and exp + 1 in _BINARY_BY_EXP:
                    mantissa //= 1024
                    exp += 1
                return f"{mantissa}{_BINARY_BY_EXP[exp]}"
        mantissa, exp = _decimal_parts(self.value)
        if fmt == "DecimalSI" and exp in _DECIMAL_BY_EXP:
            return f"{mantissa}{_DECIMAL_BY_EXP[exp]}"
        return f"{mantissa}" if exp == 0 else f"{mantissa}e{exp}"


def _decimal_parts(value: Decimal) -> tuple[int, int]:
    """(mantissa, exponent) with the exponent a multiple of 3 and no needless trailing zeros."""
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)  # finite by construction
    mantissa = int("".join(map(str, digits)) or "0")
    # Go's AsCanonicalBytes: lower the exponent to a multiple of 3 by scaling the mantissa up.
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    return (-mantissa if sign else mantissa), exponent


def parse_quantity(raw: Any) -> Quantity:
    """Parse a quantity as Kubernetes does (``"1.5Gi"``, ``"500m"``, ``"1e3"``, ``2``, ``2.0``).

    Values finer than 1n are rounded up to the nano, as ``resource.ParseQuantity`` does.
    Raises ``ValueError`` for anything Kubernetes would reject.
    """
    if isinstance(raw, bool):
        raise ValueError(f"quantities must be numbers or strings, not {raw!r}")
    if isinstance(raw, int):
        return Quantity(Decimal(raw))
    if isinstance(raw, float):
        # The official SDK sends cpu: 2.0; repr gives the shortest decimal that round-trips.
        return _rounded(Decimal(repr(raw)), "DecimalSI")
    if not isinstance(raw, str):
        raise ValueError(f"quantities must be numbers or strings, not {raw!r}")
    match = _QUANTITY.match(raw.strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression: {raw!r}")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"invalid quantity {raw!r}") from exc
    if suffix in _BINARY:
        return _rounded(base * (2 ** _BINARY[suffix]), "BinarySI")
    if suffix in _DECIMAL:
        return _rounded(base.scaleb(_DECIMAL[suffix]), "DecimalSI")
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return _rounded(base.scaleb(int(suffix[1:])), "DecimalExponent")
    raise ValueError(f"unable to parse quantity's suffix: {raw!r}")


def _rounded(value: Decimal, fmt: Format) -> Quantity:
    if value.as_tuple().exponent < -9:  # type: ignore[operator]  # finite decimals only here
        value = value.quantize(_NANO, rounding=ROUND_UP)
    return Quantity(value, fmt)


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
        total[name] = total[name] + q if name in total else q


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
        _add_into(totals, {name: q * count for name, q in pod_requests(pod_spec).items()})
    return members, {name: totals[name].canonical() for name in sorted(totals)}


# --- per-node device counts (pkg/runtime/runtime.go) --------------------------------------------


def gpu_count(resources: Obj | None) -> int:
    """GPUs per node: the first resource whose name contains ``gpu`` (any case) among the
    requests, else among the limits, rounded up; 0 when there is none."""
    if not resources:
        return 0
    for section in ("requests", "limits"):
        for name, raw in (resources.get(section) or {}).items():
            if "gpu" in str(name).lower():
                return parse_quantity(raw).to_int()
    return 0


def cpu_count(resources: Obj | None) -> int:
    """CPUs per node: ``requests.cpu`` when non-zero, else ``limits.cpu``, rounded up; 0 if unset."""
    if not resources:
        return 0
    for section in ("requests", "limits"):
        raw = (resources.get(section) or {}).get("cpu")
        if raw is not None:
            q = parse_quantity(raw)
            if q.value != 0:
                return q.to_int()
    return 0
