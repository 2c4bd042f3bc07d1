"""The schema walks decide once per schema node what they would otherwise decide per value
(which exact types pass without a look, which need the object or array walk, which pruning
cannot change); the answers stay those of the full walk: the same errors, in the same order,
with the same paths and messages, and the same pruning."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import pytest

from kubetrain.api.errors import FieldError
from kubetrain.api.schema import (
    Structural,
    _check,
    _Node,
    _prune,
    _root,
    _type_ok,
    served_kinds,
)

Obj = dict[str, Any]


class _Text(str):
    """A ``str`` of another type: exact-type shortcuts must not apply to it."""


def _schema(field: Obj) -> Obj:
    return {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"f": field}}},
    }


def _errors(field: Obj, value: Any, *, strict: bool = False) -> list[tuple[str, str, str]]:
    obj = {"apiVersion": "kt-test.io/v1", "kind": "Widget", "metadata": {}, "spec": {"f": value}}
    found = Structural(_schema(field)).errors(obj, strict=strict)
    return [(e.path, e.reason, e.type) for e in found]


_INT32 = {"type": "integer", "format": "int32"}
_QUANTITY: Obj = {
    "x-kubernetes-int-or-string": True,
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
}
_PORTS = {
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["port", "protocol"],
    "items": {
        "type": "object",
        "required": ["port"],
        "properties": {"port": _INT32, "protocol": {"type": "string"}},
    },
}
_NAMES = {"type": "array", "items": {"type": "string", "maxLength": 3}}
_LABELS = {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}
_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRUCT = {"type": "object", "properties": {"name": {"type": "string"}, "size": _INT32}}

# (id, the field's schema, the value sent, (path, reason, type) of each error)
CASES: list[tuple[str, Obj, Any, list[tuple[str, str, str]]]] = [
    ("a string under a plain string field passes", {"type": "string"}, "x" * 500, []),
    ("a string longer than maxLength is too long", {"type": "string", "maxLength": 3}, "abcd", [("spec.f", "Too long: may not be more than 3 bytes", "TooLong")]),
    ("a string of another str type is still checked", {"type": "string", "maxLength": 3}, _Text("abcd"), [("spec.f", "Too long: may not be more than 3 bytes", "TooLong")]),
    ("a string that breaks the pattern is invalid", {"type": "string", "pattern": "^a+$"}, "b", [("spec.f", "Invalid value: \"b\": should match '^a+$'", "Invalid")]),
    ("a string outside the enum is not supported", {"type": "string", "enum": ["A", "B"]}, "C", [("spec.f", 'Unsupported value: "C": supported values: "A", "B"', "NotSupported")]),
    ("a boolean under a plain boolean field passes", {"type": "boolean"}, False, []),
    ("a boolean outside its enum is not supported", {"type": "boolean", "enum": [True]}, False, [("spec.f", "Unsupported value: false: supported values: true", "NotSupported")]),
    ("a number for a string field is the wrong type", {"type": "string"}, 3, [("spec.f", "Invalid value: 3: must be of type string, not integer", "Invalid")]),
    ("an integer beyond int32 is too large", _INT32, 2**31, [("spec.f", "Invalid value: 2147483648: should be less than or equal to 2147483647", "Invalid")]),
    ("an integral float is an integer", _INT32, 2.0, []),
    ("a fractional float is not an integer", _INT32, 2.5, [("spec.f", "Invalid value: 2.5: must be of type integer, not number", "Invalid")]),
    ("a boolean is not an integer", _INT32, True, [("spec.f", "Invalid value: true: must be of type integer, not boolean", "Invalid")]),
    ("an integer under an unbounded number passes", {"type": "number"}, 10**30, []),
    ("infinity is not a number the API server stores", {"type": "number"}, float("inf"), [("spec.f", "Invalid value: inf: must be a finite number", "Invalid")]),
    ("a quantity string is matched against its pattern", _QUANTITY, "2x", [("spec.f", "Invalid value: \"2x\": should match '" + _QUANTITY["pattern"] + "'", "Invalid")]),
    ("an integer quantity passes", _QUANTITY, 2, []),
    ("a fractional float quantity passes", _QUANTITY, 0.5, []),
    ("a boolean is neither integer nor string", _QUANTITY, True, [("spec.f", "Invalid value: true: must be of type integer or string, not boolean", "Invalid")]),
    ("anything below preserve-unknown-fields passes", _OPEN, {"a": [1, {"b": None}], "c": "d"}, []),
    ("an object given a string is the wrong type", _STRUCT, "x", [("spec.f", 'Invalid value: "x": must be of type object, not string', "Invalid")]),
    ("an object's fields are checked", _STRUCT, {"name": 1, "size": -(2**40)}, [("spec.f.name", "Invalid value: 1: must be of type string, not integer", "Invalid"), ("spec.f.size", "Invalid value: -1099511627776: should be greater than or equal to -2147483648", "Invalid")]),
    ("a dict of another type is checked like a dict", _STRUCT, OrderedDict(name=1), [("spec.f.name", "Invalid value: 1: must be of type string, not integer", "Invalid")]),
    ("an array's items are checked, a null item refused", _NAMES, ["ok", "long", None], [("spec.f[1]", "Too long: may not be more than 3 bytes", "TooLong"), ("spec.f[2]", "Invalid value: null: must not be null", "Invalid")]),
    ("an array given an object is the wrong type", _NAMES, {"a": "b"}, [("spec.f", 'Invalid value: {"a":"b"}: must be of type array, not object', "Invalid")]),
    ("map values are checked and map keys must be strings", _LABELS, {"a": "long", 1: "b"}, [("spec.f[a]", "Too long: may not be more than 3 bytes", "TooLong"), ("spec.f[1]", "Invalid value: map keys must be strings", "Invalid")]),
    ("list-map items are required fields and unique by their keys", _PORTS, [{"port": 80}, {"port": 80}, {"protocol": "TCP"}], [("spec.f[2].port", "Required value", "Required"), ("spec.f[1]", 'Duplicate value: {"port":80}', "Duplicate")]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "field", "value", "expected"), CASES, ids=[c[0] for c in CASES])
def test_validation(
    case: str, field: Obj, value: Any, expected: list[tuple[str, str, str]]
) -> None:
    assert _errors(field, value) == expected


def test_strict_validation_names_unknown_fields_below_known_ones() -> None:
    assert _errors(_STRUCT, {"name": "a", "nmae": "b"}, strict=True) == [
        ("spec.f.nmae", "unknown field; did you mean name?", "Invalid")
    ]


# --- the shortcut tables against the full walk, for every node of our kinds' schemas ----------

_SAMPLES: dict[type, list[Any]] = {
    str: ["", "a", "x" * 70000, "-1", "1Gi", "TCP", "Always", "a.b-c"],
    bool: [True, False],
    int: [0, 1, -1, 2**31, -(2**31) - 1, 2**63, 10**30],
    float: [0.5, 2.0, -3.0, 1e300, float("nan"), float("inf")],
    dict: [{}, {"name": "a"}, {"a": None}, {"zzz": [1]}, {"name": None, "x": {}}],
    list: [[], ["a", "a"], [None], [{"name": "a"}, {"name": "a"}], [1, {}]],
}


def _nodes() -> list[tuple[str, _Node]]:
    """Every distinct compiled node of the schemas of our kinds, with a readable name."""
    seen: set[int] = set()
    out: list[tuple[str, _Node]] = []

    def walk(node: _Node, path: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        out.append((path, node))
        for name, child in (node.props or {}).items():
            walk(child, f"{path}.{name}")
        if node.items is not None:
            walk(node.items, f"{path}[]")
        if node.values is not None:
            walk(node.values, f"{path}[*]")

    for api_version, kind in served_kinds():
        root = _root(f"{api_version}/{kind}")
        assert root is not None
        walk(root, kind)
    return out


def _full(node: _Node, value: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    _check(node, copy.deepcopy(value), "f", errors, False)
    return errors


def test_every_schema_node_was_compiled_with_its_shortcuts() -> None:
    nodes = _nodes()
    assert len(nodes) > 1000
    assert all(set(node.types_ok) == {str, bool, int, dict, list} for _, node in nodes)


def test_exact_types_a_node_lets_pass_unchecked_pass_the_full_check() -> None:
    for path, node in _nodes():
        for kind, check in node.checks.items():
            if check is None:
                for value in _SAMPLES[kind]:
                    assert _full(node, value) == [], (path, value)


def test_an_object_or_array_walk_called_directly_finds_what_the_full_check_finds() -> None:
    for path, node in _nodes():
        for kind, check in node.checks.items():
            if check is not None:
                for value in _SAMPLES[kind]:
                    errors: list[FieldError] = []
                    check(node, copy.deepcopy(value), "f", errors, False)
                    assert errors == _full(node, value), (path, value)


def test_type_answers_decided_per_node_are_the_type_checks() -> None:
    for path, node in _nodes():
        for kind, ok in node.types_ok.items():
            for value in _SAMPLES[kind]:
                assert _type_ok(node, value) is ok, (path, value)


def test_values_pruning_skips_are_values_pruning_leaves_as_they_are() -> None:
    for path, node in _nodes():
        for kind in node.prune_skip:
            for value in _SAMPLES.get(kind, [None]):
                pruned, dropped = copy.deepcopy(value), list[str]()
                _prune(node, pruned, None, dropped, nulls=True)
                assert (pruned, dropped) == (value, []), (path, value)
