"""Any CRD's structural schema applied as kube-apiserver applies it (apiextensions'
"Defaulting", "Defaulting and Nullable" and "Controlling pruning"): `Structural.prune` then
`Structural.default`, on whole objects, in place."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api.schema import Structural

Obj = dict[str, Any]


def _schema(**spec_props: Any) -> Obj:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": spec_props},
        },
    }


def _obj(spec: Any) -> Obj:
    return {
        "apiVersion": "kt-test.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": spec,
    }


_STR = {"type": "string"}
_PORTS = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"port": {"type": "integer"}, "protocol": {**_STR, "default": "TCP"}},
    },
}
_LABELS = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {"value": _STR, "weight": {"type": "integer", "default": 1}},
    },
}
_OPEN_WITH_DEFAULT = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {"mode": {**_STR, "default": "fast"}},
}
_NESTED = {
    "type": "object",
    "default": {},
    "properties": {
        "type": {**_STR, "default": "RollingUpdate"},
        "rolling": {
            "type": "object",
            "properties": {"partition": {"type": "integer", "default": 0}},
        },
    },
}
_NULLS = {
    "foo": {**_STR, "nullable": False, "default": "default"},
    "bar": {**_STR, "nullable": True},
    "baz": _STR,
    "qux": {**_STR, "nullable": True, "default": "d"},
}

# (id, the spec's properties, the spec sent, the spec stored)
DEFAULTS: list[tuple[str, Obj, Any, Any]] = [
    ("a missing field gets its default", {"replicas": {"type": "integer", "default": 1}}, {}, {"replicas": 1}),
    ("a field the object sets keeps its value", {"replicas": {"type": "integer", "default": 1}}, {"replicas": 3}, {"replicas": 3}),
    ("a default inside an array item is applied", {"ports": _PORTS}, {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}, {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}),
    ("a default inside a map's values is applied", {"labels": _LABELS}, {"labels": {"a": {"value": "x"}}}, {"labels": {"a": {"value": "x", "weight": 1}}}),
    ("a default under preserve-unknown-fields is still applied", {"extra": _OPEN_WITH_DEFAULT}, {"extra": {"anything": [1]}}, {"extra": {"anything": [1], "mode": "fast"}}),
    ("a default applies only where its parent object is present", {"ports": _PORTS, "extra": _OPEN_WITH_DEFAULT}, {}, {}),
    ("a defaulted object gets its own fields' defaults", {"strategy": _NESTED}, {}, {"strategy": {"type": "RollingUpdate"}}),
    ("an object the request has gets its fields' defaults below any depth", {"strategy": _NESTED}, {"strategy": {"rolling": {}}}, {"strategy": {"type": "RollingUpdate", "rolling": {"partition": 0}}}),
    ("a null non-nullable field is dropped and gets its default; a nullable null stays null, undefaulted; a null without default goes", _NULLS, {"foo": None, "bar": None, "baz": None, "qux": None}, {"foo": "default", "bar": None, "qux": None}),
    ("a default is a copy: objects never share it", {"strategy": {**_NESTED, "default": {"rolling": {}}}}, {}, {"strategy": {"type": "RollingUpdate", "rolling": {"partition": 0}}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "props", "sent", "stored"), DEFAULTS, ids=[d[0] for d in DEFAULTS]
)
def test_defaulting(case: str, props: Obj, sent: Any, stored: Any) -> None:
    schema = Structural(_schema(**props))
    obj = _obj(copy.deepcopy(sent))
    schema.prune(obj)
    schema.default(obj)
    assert obj["spec"] == stored
    # Defaults are copies: changing what one object got changes nothing for the next.
    _touch(obj["spec"])
    again = _obj(copy.deepcopy(sent))
    schema.prune(again)
    schema.default(again)
    assert again["spec"] == stored


def _touch(value: Any) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _touch(v)
        value["touched"] = True


_JSON = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {"spec": {"type": "object", "properties": {"foo": _STR, "bar": _STR}}},
}
_EMBEDDED = {
    "type": "object",
    "x-kubernetes-embedded-resource": True,
    "properties": {"spec": {"type": "object", "properties": {"x": _STR}}},
}

# (id, the spec's properties, the spec sent, the spec stored, the paths reported)
PRUNING: list[tuple[str, Obj, Any, Any, list[str]]] = [
    ("an unknown field is pruned and reported", {"foo": _STR}, {"foo": "a", "fo": "b"}, {"foo": "a"}, ["spec.fo"]),
    ("everything below preserve-unknown-fields is kept", {"json": {"x-kubernetes-preserve-unknown-fields": True}}, {"json": {"a": {"b": [1]}}}, {"json": {"a": {"b": [1]}}}, []),
    ("a field named below preserve-unknown-fields is pruned again inside", {"json": _JSON}, {"json": {"spec": {"foo": "abc", "bar": "def", "something": "x"}, "status": {"something": "x"}}}, {"json": {"spec": {"foo": "abc", "bar": "def"}, "status": {"something": "x"}}}, ["spec.json.spec.something"]),
    ("an object without properties keeps no field", {"empty": {"type": "object"}}, {"empty": {"a": 1}}, {"empty": {}}, ["spec.empty.a"]),
    ("an embedded resource keeps its apiVersion, kind and metadata", {"template": _EMBEDDED}, {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "spec": {"x": "y", "z": 1}}}, {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "y"}}}, ["spec.template.metadata.bogus", "spec.template.spec.z"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "props", "sent", "stored", "dropped"), PRUNING, ids=[p[0] for p in PRUNING]
)
def test_pruning(case: str, props: Obj, sent: Any, stored: Any, dropped: list[str]) -> None:
    obj = _obj(copy.deepcopy(sent))
    assert Structural(_schema(**props)).prune(obj) == dropped
    assert obj["spec"] == stored


ROOTS = [
    ("a root that preserves unknown fields", {"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
    ("a root that names only spec", {"type": "object", "properties": {"spec": {"type": "object"}}}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "root"), ROOTS, ids=[r[0] for r in ROOTS])
def test_type_meta_and_object_meta_are_the_servers_whatever_the_crd_says(
    case: str, root: Obj
) -> None:
    obj = _obj({})
    obj["metadata"].update(labels={"a": "b"}, lables={"a": "b"})
    assert Structural(root).prune(obj) == ["metadata.lables"]
    assert obj == {
        "apiVersion": "kt-test.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {},
    }
