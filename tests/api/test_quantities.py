"""Kubernetes quantities: parsing every suffix, numeric comparison, Value() rounding, format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import (
    Quantity,
    canonical_quantity,
    compare_quantities,
    is_quantity,
    parse_quantity,
    quantity_milli_value,
    quantity_value,
)

CANONICAL = [
    ("the SDK's float 2.0 is 2", 2.0, "2"),
    ("an int stays an int", 4, "4"),
    ("a float fraction becomes milli", 1.5, "1500m"),
    ("a decimal fraction becomes milli", "0.5", "500m"),
    ("milli stays milli", "500m", "500m"),
    ("thousands become k", "2000", "2k"),
    ("binary stays binary", "2Gi", "2Gi"),
    ("binary normalises to the largest exact unit", "2048Ki", "2Mi"),
    ("binary keeps a non-multiple", "1536Mi", "1536Mi"),
    ("a small binary value reads as decimal", "512", "512"),
    ("exponent form stays exponent form", "1e3", "1e3"),
    ("upper-case E alone is exa", "1E", "1E"),
    ("nano is the finest unit", "1n", "1n"),
    ("anything finer than nano rounds up", "0.1n", "1n"),
    ("micro", "1u", "1u"),
    ("zero is 0", "0Gi", "0"),
    ("negative values keep their sign", "-1.5", "-1500m"),
    ("a plus sign is dropped", "+3k", "3k"),
    ("peta and tera", "1P", "1P"),
]


@pytest.mark.parametrize(
    ("value", "text"), [c[1:] for c in CANONICAL], ids=[c[0] for c in CANONICAL]
)
def test_canonical_form_is_what_kubernetes_serialises(value: str | int | float, text: str) -> None:
    assert canonical_quantity(value) == text


VALUES = [
    ("500m rounds up to 1", "500m", 1, 500),
    ("1 is 1", "1", 1, 1000),
    ("1.2 rounds up to 2", "1.2", 2, 1200),
    ("1Ki is 1024", "1Ki", 1024, 1024000),
    ("1G is a billion", "1G", 10**9, 10**12),
    ("1Ei is 2 to the 60", "1Ei", 2**60, 2**60 * 1000),
    ("exponent with sign", "5e-3", 1, 5),
    ("negative rounds away from zero", "-1.5", -2, -1500),
    ("a float", 0.25, 1, 250),
]


@pytest.mark.parametrize(
    ("value", "whole", "milli"), [c[1:] for c in VALUES], ids=[c[0] for c in VALUES]
)
def test_value_and_milli_value_round_up_like_go(value: str | float, whole: int, milli: int) -> None:
    assert quantity_value(value) == whole
    assert quantity_milli_value(value) == milli


@pytest.mark.parametrize(
    ("a", "b", "order"),
    [("1Gi", "1024Mi", 0), ("500m", 1, -1), (2.0, "2", 0), ("1k", "1Ki", -1), ("1e3", "1k", 0)],
    ids=[
        "1Gi equals 1024Mi",
        "500m is less than 1",
        "2.0 equals 2",
        "1k is less than 1Ki",
        "1e3 equals 1k",
    ],
)
def test_quantities_compare_numerically(a: str | float, b: str | float, order: int) -> None:
    assert compare_quantities(a, b) == order
    assert (parse_quantity(a) == parse_quantity(b)) == (order == 0)
    assert (parse_quantity(a) < parse_quantity(b)) == (order < 0)


@pytest.mark.parametrize(
    "bad",
    ["", "1.5.5", "2 cores", "1KiB", "1e", "1e1.5", "Gi", "nan", float("inf"), True, None, [1]],
    ids=[
        "empty",
        "two dots",
        "words",
        "bytes suffix",
        "dangling exponent",
        "fractional exponent",
        "suffix only",
        "nan text",
        "infinity",
        "a boolean",
        "None",
        "a list",
    ],
)
def test_non_quantities_are_rejected(bad: object) -> None:
    assert not is_quantity(bad)
    with pytest.raises(ValueError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_quantity_objects_hash_by_value() -> None:
    assert len({parse_quantity("1Gi"), parse_quantity("1024Mi"), parse_quantity(2**30)}) == 1
    assert isinstance(parse_quantity("1"), Quantity)


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_canonical_text_parses_back_to_the_same_value(n: int) -> None:
    for text in (str(n), f"{n}m", f"{n}Ki"):
        q = parse_quantity(text)
        assert parse_quantity(str(q)) == q


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
def test_any_finite_float_is_a_quantity(x: float) -> None:
    assert is_quantity(x)
    assert compare_quantities(canonical_quantity(x), x) == 0 or abs(x) < 1e-9
