"""Patch documents: JSON merge patch, JSON patch, strategic merge and apply.

Strategic merge patch is ``kubetrain.runtime.smp``'s (apimachinery's semantics) driven by the
patch strategies and merge keys of Kubernetes' published OpenAPI for the core kinds (generated
into ``kubetrain/api/patch_strategies.json``). Server-side apply's merge lives in ``ssa``; the
managedFields ``fieldsV1`` encoding of field paths is here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonpatch

from kubetrain.api import codec
from kubetrain.local.apiserver.errors import ApiError
from kubetrain.runtime.smp import PatchError, core_kind_schema, strategic_merge

__all__ = [
    "apply_json_patch",
    "fields_v1",
    "leaf_paths",
    "merge_patch",
    "paths_from_fields_v1",
    "strategic_merge_patch",
]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return codec.clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902; a failed ``test`` or a bad path is a 422, a malformed document a 400."""
    if not isinstance(ops, list):
        raise ApiError(
            400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    try:
        result = jsonpatch.JsonPatch(ops).apply(target, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "the patched document is not an object")
    return result


def strategic_merge_patch(target: Any, patch: Any, api_version: str, kind: str) -> Any:
    """Kubernetes' strategic merge of ``patch`` into a ``kind`` object: lists merge by the patch
    strategy and merge key Kubernetes publishes for each field (finalizers as a set, containers
    by name, ...); a malformed directive is a 400, as apimachinery answers."""
    try:
        return strategic_merge(target, patch, core_kind_schema(api_version, kind))
    except PatchError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from exc


def leaf_paths(obj: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every path through maps to a non-map value (lists count as leaves)."""
    if not isinstance(obj, dict) or (not obj and prefix):
        return {prefix} if prefix else set()
    out: set[tuple[str, ...]] = set()
    for key, value in obj.items():
        out |= leaf_paths(value, (*prefix, key))
    return out


def fields_v1(paths: set[tuple[str, ...]]) -> dict[str, Any]:
    """A managedFields ``fieldsV1`` document for a set of paths (``k:`` components kept as is),
    each level in the order of its components (the order of the sorted paths)."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path:
            node = node.setdefault(part, {})
    return _spelled(tree)


def _spelled(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A ``fieldsV1`` document for a tree of path components (``{"spec": {"x": {}}}``), each
    level sorted by component."""
    # Sorting each level's few components costs less than sorting every whole path; sorting
    # the items (keys are unique: no value is ever compared) saves a lookup per component.
    return {
        (part if part[:2] == "k:" else "f:" + part): (_spelled(sub) if sub else {})
        for part, sub in sorted(tree.items())
    }


def paths_from_fields_v1(doc: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The leaf paths a ``fieldsV1`` document records (``f:`` fields and ``k:`` list elements)."""
    out: set[tuple[str, ...]] = set()
    _add_leaves(doc, (), out)
    return out


def _add_leaves(
    node: Mapping[str, Any], prefix: tuple[str, ...], out: set[tuple[str, ...]]
) -> bool:
    """Add the leaf paths below ``node`` to ``out``; whether it has any (a level without fields
    or elements, ``{}`` or only ``"."``, is itself the leaf)."""
    found = False
    for key, value in node.items():
        mark = key[:2]
        if mark == "f:":
            path = (*prefix, key[2:])
        elif mark == "k:":
            path = (*prefix, key)
        else:
            continue
        found = True
        if not (value and isinstance(value, Mapping) and _add_leaves(value, path, out)):
            out.add(path)
    return found
