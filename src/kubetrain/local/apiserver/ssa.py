"""Server-side apply's field paths, aware of the schema's associative lists.

A path is a tuple of components: field names, and ``k:{"type":"Complete"}`` for one element of
a list the schema declares ``x-kubernetes-list-type: map`` (TrainJob ``status.conditions`` keyed
by type, ``spec.runtimePatches`` keyed by manager). Such lists merge element by element and each
element has its own owner, so two managers can apply their own conditions or runtime patches
without wiping each other's. Other lists are atomic: the list is one field. Without a schema
(core kinds) every list is atomic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from kubetrain.api.access import as_list, obj_at
from kubetrain.local.apiserver.patching import paths_from_fields_v1

__all__ = ["Path", "apply_merge", "owned_fields_v1", "owned_paths", "remove_path", "value_at"]

Path = tuple[str, ...]
_NO_SCHEMA: Mapping[str, Any] = {}
# metadata fields nobody owns (the server sets them, or they name the object).
_UNOWNED_META = frozenset(
    {
        "name", "namespace", "generateName", "uid", "resourceVersion", "creationTimestamp", "generation",
        "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields",
    }
)  # fmt: skip


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    props = obj_at(schema, "properties")
    if key in props:
        sub: Mapping[str, Any] = props[key]
        return sub
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else _NO_SCHEMA


def _map_keys(schema: Mapping[str, Any]) -> tuple[str, ...] | None:
    if schema.get("x-kubernetes-list-type") == "map":
        return tuple(as_list(schema.get("x-kubernetes-list-map-keys")))
    return None


# One encoder for every element key: json.dumps with options builds a new one per call.
_KEY_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


# The same text for plain values (printable ASCII strings, integers, booleans, null), at a
# fraction of the CPU; anything else is left to json's own escaping.
_FAST_KEY_JSON = msgspec.json.Encoder(order="sorted")


def _plain(value: Any) -> bool:
    if isinstance(value, str):
        return value.isascii() and value.isprintable()
    return value is None or (isinstance(value, int) and -(2**63) <= value < 2**64)


def _component(item: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    wanted = {k: item.get(k) for k in keys}
    if all(_plain(v) for v in wanted.values()):
        return "k:" + _FAST_KEY_JSON.encode(wanted).decode()
    return "k:" + _KEY_JSON.encode(wanted)


def _items_schema(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    items = schema.get("items")
    return items if isinstance(items, Mapping) else _NO_SCHEMA


# How each level of an owned-fields document is ordered: by component for ``fieldsV1`` (as
# `patching.fields_v1` orders it), as walked where only its leaves are read.
_Order = Callable[[Iterable[tuple[str, Any]]], Iterable[tuple[str, Any]]]


def _as_walked(items: Iterable[tuple[str, Any]]) -> Iterable[tuple[str, Any]]:
    return items


def _owned_below(value: Any, schema: Mapping[str, Any], order: _Order) -> dict[str, Any]:
    """The owned-fields document of what ``value`` owns below its own path: ``{}`` for a leaf
    (a scalar, an atomic list, ``{}``). (`_child` and `_map_keys` written out: this runs for
    every field an apply sends.)"""
    if isinstance(value, dict):
        if not value:
            return {}
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        other = extra if isinstance(extra, Mapping) else _NO_SCHEMA
        known = props if isinstance(props, dict) else _NO_SCHEMA
        # "f:" + key sorts as the keys do (they are unique: no value is ever compared).
        return {
            "f:" + k: _owned_below(v, known.get(k, other), order) for k, v in order(value.items())
        }
    if isinstance(value, list) and value:
        keys = _map_keys(schema)
        if keys and all(isinstance(i, dict) for i in value):
            items = _items_schema(schema)
            out: dict[str, Any] = {}
            for element in value:
                component = _component(element, keys)
                below = _owned_below(element, items, order)
                # Elements with the same key (refused elsewhere) own what they have between them.
                out[component] = _merged(out[component], below) if component in out else below
            return dict(order(out.items()))
    return {}


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    both = {k: _merged(a[k], v) if k in a else v for k, v in b.items()}
    return dict(sorted({**a, **both}.items()))


def _owned(
    obj: Mapping[str, Any], schema: Mapping[str, Any] | None, order: _Order
) -> dict[str, Any]:
    """What a manager owns by applying ``obj`` (type fields and server metadata excluded), as
    an owned-fields document, in one walk."""
    root = schema or _NO_SCHEMA
    out: dict[str, Any] = {}
    for key, value in order(obj.items()):
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, Mapping):
            meta = {
                "f:" + k: _owned_below(v, _NO_SCHEMA, order)
                for k, v in order(value.items())
                if k not in _UNOWNED_META
            }
            if meta:
                out["f:metadata"] = meta
            continue
        out["f:" + key] = _owned_below(value, _child(root, key), order)
    return out


def owned_fields_v1(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``fieldsV1`` document of what a manager owns by applying ``obj``."""
    return _owned(obj, schema, sorted)


def owned_paths(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> set[Path]:
    """The paths a manager owns by applying ``obj``: the leaves of its owned fields (the same
    walk as `owned_fields_v1`, without ordering what only its leaves are read from)."""
    return paths_from_fields_v1(_owned(obj, schema, _as_walked))


def apply_merge(target: Any, applied: Any, schema: Mapping[str, Any] | None) -> Any:
    """Maps merge; associative lists merge by key (new elements appended); the rest replaces."""
    schema = schema or _NO_SCHEMA
    if isinstance(applied, dict) and isinstance(target, dict):
        result = dict(target)
        for key, value in applied.items():
            result[key] = apply_merge(result.get(key), value, _child(schema, key))
        return result
    keys = _map_keys(schema)
    if keys and isinstance(applied, list) and isinstance(target, list):
        items = _items_schema(schema)
        merged = list(target)
        for element in applied:
            if not isinstance(element, dict):
                return applied
            wanted = {k: element.get(k) for k in keys}
            at = next(
                (i for i, t in enumerate(merged) if isinstance(t, dict) and _same(t, wanted)),
                None,
            )
            if at is None:
                merged.append(element)
            else:
                merged[at] = apply_merge(merged[at], element, items)
        return merged
    return applied


def _same(element: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``element`` has the key values ``wanted`` names. A key the applied element leaves
    out matches anything: the stored one has it defaulted (a port's ``protocol: TCP``)."""
    return all(v is None or element.get(k) == v for k, v in wanted.items())


def _step(node: Any, part: str) -> tuple[Any, Any]:
    """(container, index-or-key) of ``part`` inside ``node``, or (None, None)."""
    if part.startswith("k:") and isinstance(node, list):
        wanted = json.loads(part[2:])
        for i, element in enumerate(node):
            if isinstance(element, dict) and _same(element, wanted):
                return node, i
        return None, None
    if isinstance(node, dict) and part in node:
        return node, part
    return None, None


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path``, or None."""
    node = obj
    for part in path:
        container, where = _step(node, part)
        if container is None:
            return None
        node = container[where]
    return node


def remove_path(obj: dict[str, Any], path: Path) -> None:
    """Delete what ``path`` names, then any maps and lists it leaves empty. An associative-list
    element that loses a key field goes entirely (fields others added, such as the
    ``runtimePatches[].time`` the defaulter stamps, do not keep a keyless element alive)."""
    trail: list[tuple[Any, Any, str]] = []
    node: Any = obj
    for part in path:
        container, where = _step(node, part)
        if container is None:
            return
        trail.append((container, where, part))
        node = container[where]
    for index in range(len(trail) - 1, -1, -1):
        container, where, _ = trail[index]
        del container[where]
        parent_part = trail[index - 1][2] if index > 0 else ""
        if parent_part.startswith("k:") and any(
            k not in container for k in json.loads(parent_part[2:])
        ):
            continue  # the element lost its key: remove it from its list as well
        if container or container is obj:
            break
