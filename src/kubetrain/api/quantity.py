"""Kubernetes resource quantities ("500m", "2Gi", "1e3", 2, 2.0): parse, compare, format.

Values are kept exactly as rational numbers (``fractions.Fraction``), so "1Gi" == "1073741824"
and "0.5" == "500m" compare equal. Formatting follows apimachinery's ``Quantity.String()``:
the canonical form keeps the suffix family of the input (decimal SI, binary SI, or exponent),
so the official SDK's ``cpu: 2.0`` serialises as ``"2"`` and ``1.5`` as ``"1500m"``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Literal

__all__ = [
    "Quantity",
    "QuantityFormat",
    "canonical_quantity",
    "compare_quantities",
    "is_quantity",
    "parse_quantity",
    "quantity_milli_value",
    "quantity_value",
]

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_RE = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>[KMGTPE]i)|(?P<dec>[numkMGTPE])|[eE](?P<exp>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)))?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {e: s for s, e in _DECIMAL.items()}
_BINARY_SUFFIX = {e: s for s, e in _BINARY.items()}
# apimachinery keeps at most nano precision and rounds anything finer up.
_NANO = Fraction(1, 10**9)


@total_ordering
@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the suffix family it was written in."""

    value: Fraction
    format: QuantityFormat = "DecimalSI"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return _format(self.value, self.format)

    def value_int(self) -> int:
        """Go's ``Quantity.Value()``: the integer value, rounded up (away from zero)."""
        return _round_up(self.value)

    def milli_value(self) -> int:
        """Go's ``Quantity.MilliValue()``: value × 1000, rounded up (away from zero)."""
        return _round_up(self.value * 1000)


def _round_up(v: Fraction) -> int:
    return math.ceil(v) if v >= 0 else math.floor(v)


@lru_cache(maxsize=4096)
def _parse_str(text: str) -> Quantity:
    m = _RE.match(text.strip())
    if m is None:
        raise ValueError(f"quantities must match the regular expression of Kubernetes: {text!r}")
    value = Fraction(m["num"])
    fmt: QuantityFormat = "DecimalSI"
    if m["bin"]:
        value *= 2 ** _BINARY[m["bin"]]
        fmt = "BinarySI"
    elif m["exp"] is not None:
        exp = Fraction(m["exp"])
        if exp.denominator != 1:
            raise ValueError(f"quantity exponent must be an integer: {text!r}")
        value *= Fraction(10) ** int(exp)
        fmt = "DecimalExponent"
    elif m["dec"]:
        value *= Fraction(10) ** _DECIMAL[m["dec"]]
    if value % _NANO:
        value = Fraction(_round_up(value / _NANO)) * _NANO
    return Quantity(value, fmt)


def parse_quantity(v: str | int | float | Quantity) -> Quantity:
    """Parse a quantity as found on the wire; ``ValueError`` if it is not one."""
    if isinstance(v, Quantity):
        return v
    if isinstance(v, bool):
        raise ValueError(f"not a quantity: {v!r}")
    if isinstance(v, int):
        return Quantity(Fraction(v))
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a quantity: {v!r}")
        # Parse the decimal text the number was written as (what Kubernetes sees in JSON).
        return _parse_str(repr(v))
    if isinstance(v, str):
        return _parse_str(v)
    raise ValueError(f"not a quantity: {v!r}")


def is_quantity(v: object) -> bool:
    """True for a string, int or float that Kubernetes accepts as a quantity."""
    try:
        parse_quantity(v)  # type: ignore[arg-type]  # any object may be tested
    except ValueError:
        return False
    return True


def compare_quantities(a: str | int | float | Quantity, b: str | int | float | Quantity) -> int:
    """-1, 0 or 1, numerically: ``compare_quantities("1Gi", "1024Mi") == 0``."""
    x, y = parse_quantity(a).value, parse_quantity(b).value
    return (x > y) - (x < y)


def quantity_value(v: str | int | float | Quantity) -> int:
    """Go's ``Quantity.Value()``: rounds up, so ``quantity_value("500m") == 1``."""
    return parse_quantity(v).value_int()


def quantity_milli_value(v: str | int | float | Quantity) -> int:
    """Go's ``Quantity.MilliValue()``: ``quantity_milli_value("0.5") == 500``."""
    return parse_quantity(v).milli_value()


def canonical_quantity(v: str | int | float | Quantity) -> str:
    """The string Kubernetes serialises: ``2.0`` -> ``"2"``, ``"1.5"`` -> ``"1500m"``."""
    return str(parse_quantity(v))


def _format(value: Fraction, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    if fmt == "BinarySI" and -1024 < value < 1024:
        # Small binary values read better (and stay exact) in decimal.
        fmt = "DecimalSI"
    if fmt == "BinarySI" and value.denominator != 1:
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        mantissa, exp = int(value), 0
        while exp < 60 and mantissa % 1024 == 0:
            mantissa //= 1024
            exp += 10
        return f"{mantissa}{_BINARY_SUFFIX.get(exp, '')}"
    # Decimal: integer mantissa with an exponent that is a multiple of 3.
    exp = 0
    while value.denominator != 1:
        value *= 10
        exp -= 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa //= 10
        exp += 1
    while exp % 3:
        mantissa *= 10
        exp -= 1
    if fmt == "DecimalSI" and exp in _DECIMAL_SUFFIX:
        return f"{mantissa}{_DECIMAL_SUFFIX[exp]}"
    return f"{mantissa}e{exp}" if exp else str(mantissa)
