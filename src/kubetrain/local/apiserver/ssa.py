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
from collections.abc import Mapping
from typing import Any

import msgspec

from kubetrain.api.access import as_list, obj_at

__all__ = ["Path", "apply_merge", "owned_paths", "owned_tree", "remove_path", "value_at"]

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


def _grow(value: Any, schema: Mapping[str, Any], node: dict[str, Any]) -> None:
    """Add below ``node`` (the tree node of ``value``'s path) the components of the paths
    ``value`` owns; a value without any (a scalar, an atomic list, ``{}``) is itself a leaf.
    (`_child` and `_map_keys` written out: this runs for every field an apply creates.)"""
    if isinstance(value, dict):
        if value:
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            other = extra if isinstance(extra, Mapping) else _NO_SCHEMA
            known = props if isinstance(props, dict) else _NO_SCHEMA
            for key, item in value.items():
                _grow(item, known.get(key, other), node.setdefault(key, {}))
    elif isinstance(value, list) and value:
        keys = _map_keys(schema)
        if keys and all(isinstance(i, dict) for i in value):
            items = _items_schema(schema)
            for element in value:
                _grow(element, items, node.setdefault(_component(element, keys), {}))


def owned_tree(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The paths a manager owns by applying ``obj`` (type fields and server metadata
    excluded) as a tree of their components, one walk: `patching.spell_fields` makes it a
    ``fieldsV1`` document, `owned_paths` lists its leaves."""
    tree: dict[str, Any] = {}
    root = schema or _NO_SCHEMA
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, Mapping):
            for meta_key, meta_value in value.items():
                if meta_key not in _UNOWNED_META:
                    meta = tree.setdefault("metadata", {})
                    _grow(meta_value, _NO_SCHEMA, meta.setdefault(meta_key, {}))
            continue
        _grow(value, _child(root, key), tree.setdefault(key, {}))
    return tree


def owned_paths(obj: Mapping[str, Any], schema: Mapping[str, Any] | None) -> set[Path]:
    """The paths a manager owns by applying ``obj``: the leaves of `owned_tree`."""
    out: set[Path] = set()
    stack: list[tuple[Path, dict[str, Any]]] = [((), owned_tree(obj, schema))]
    while stack:
        prefix, node = stack.pop()
        for part, below in node.items():
            path = (*prefix, part)
            if below:
                stack.append((path, below))
            else:
                out.add(path)
    return out


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
