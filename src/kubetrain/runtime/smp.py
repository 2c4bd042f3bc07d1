"""Strategic merge patch, as Kubernetes' apimachinery applies it, over plain JSON-like dicts.

Upstream Trainer v2.3 merges each ``spec.runtimePatches[].trainingRuntimeSpec.template.spec`` into
the runtime's JobSet spec with ``strategicpatch.StrategicMergePatch(runtime, patch, JobSetSpec{})``
(trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go), and merges ``spec.trainer.resourcesPerNode`` onto the runtime's ``node``
container resources the same way (trainer v2.3.0 pkg/runtime/core/trainingruntime.go). This module reproduces that merge without Go types: the
per-field patch strategies that Go reads from struct tags are written down here as data
(:data:`MERGE_KEYS`).

Semantics reproduced (apimachinery ``pkg/util/strategicpatch``):

- maps merge recursively; a ``null`` value deletes the key;
- a list field without a patch strategy is replaced by the patch's list (atomic);
- a list field with ``patchStrategy: merge`` and a ``patchMergeKey`` merges element-wise by that
  key; elements new to the list are added, and the result is ordered the way apimachinery orders
  it: patch elements keep the patch's relative order, server-only elements keep the original's,
  and a new element goes before the server-only elements that follow it (so a single new
  container lands first, as ``kubectl patch`` shows);
- a merged list of scalars (``finalizers``) is the union, deduplicated;
- directives: ``$patch: replace`` (map or list element) replaces, ``$patch: delete`` deletes a map
  (leaving ``{}``) or a keyed list element, ``$patch: merge`` is the default and is accepted as a
  no-op (Go rejects it; nothing upstream ever sends it); ``$deleteFromPrimitiveList/<field>``,
  ``$setElementOrder/<field>`` and ``$retainKeys`` as apimachinery defines them;
- values copied from the patch without an original to merge into lose their directive keys and
  ``null`` members, which is what Go's round trip through the typed struct does to them.

Malformed directives raise :class:`PatchError`; directive-free input never raises, whatever its
shape: where Go would fail on a type mismatch (say a keyed list holding scalars) the patch's value
wins, as it would in a JSON merge patch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from kubetrain.runtime.podspec import tree_copy

__all__ = [
    "MERGE_KEYS",
    "FieldMeta",
    "PatchError",
    "apply_runtime_patches",
    "core_kind_schema",
    "core_patch_types",
    "merge_resources",
    "strategic_merge",
]

Obj = dict[str, Any]

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"


class PatchError(ValueError):
    """A patch whose directives apimachinery would reject (unknown ``$patch`` value, ...)."""


@dataclass(frozen=True, slots=True)
class FieldMeta:
    """What Go's struct tags say about one field: its element type and its patch strategy.

    ``type`` names another entry of :data:`MERGE_KEYS` (``None``: no known structure below, so maps
    merge and lists are replaced). ``merge_key`` set means ``patchStrategy: merge`` keyed by it;
    ``""`` means a merged list of scalars.
    """

    type: str | None = None
    merge_key: str | None = None
    strategy: Literal["merge", "replace"] | None = None
    retain_keys: bool = False


def _keyed(key: str, type_: str | None = None, *, retain: bool = False) -> FieldMeta:
    return FieldMeta(type=type_, merge_key=key, strategy="merge", retain_keys=retain)


def _typed(type_: str) -> FieldMeta:
    return FieldMeta(type=type_)


# Patch metadata per type, transcribed from the ``patchStrategy``/``patchMergeKey`` struct tags of
# the Go types (k8s.io/api core/v1 and batch/v1, sigs.k8s.io/jobset api/jobset/v1alpha2
# jobset_types.go). Only fields that carry a tag, or lead to one, are listed: every other map
# merges recursively and every other list is atomic, which is apimachinery's default. Notably
# ``tolerations``, ``command``/``args``, ``envFrom``, ``resources.claims`` (core/v1 has no tag on
# it) and everything in JobSpec are atomic.
MERGE_KEYS: Mapping[str, Mapping[str, FieldMeta]] = {
    "JobSetSpec": {
        "replicatedJobs": _keyed("name", "ReplicatedJob"),
    },
    "ReplicatedJob": {
        "template": _typed("JobTemplateSpec"),
        "dependsOn": _keyed("name"),
    },
    "JobTemplateSpec": {
        "metadata": _typed("ObjectMeta"),
        "spec": _typed("JobSpec"),
    },
    "JobSpec": {
        "template": _typed("PodTemplateSpec"),
    },
    "PodTemplateSpec": {
        "metadata": _typed("ObjectMeta"),
        "spec": _typed("PodSpec"),
    },
    "ObjectMeta": {
        "finalizers": _keyed(""),
        "ownerReferences": _keyed("uid"),
    },
    "PodSpec": {
        "volumes": _keyed("name", retain=True),
        "initContainers": _keyed("name", "Container"),
        "containers": _keyed("name", "Container"),
        "ephemeralContainers": _keyed("name", "Container"),
        "imagePullSecrets": _keyed("name"),
        "hostAliases": _keyed("ip"),
        "topologySpreadConstraints": _keyed("topologyKey"),
        "schedulingGates": _keyed("name"),
        "resourceClaims": _keyed("name", retain=True),
    },
    "Container": {
        "ports": _keyed("containerPort"),
        "env": _keyed("name"),
        "volumeMounts": _keyed("mountPath"),
        "volumeDevices": _keyed("devicePath"),
    },
    # Trainer's own patch metadata for resourcesPerNode (pkg/util/trainingruntime
    # resourcerequirements.go): limits/requests merge per resource name, claims by name.
    "TrainerResourceRequirements": {
        "claims": _keyed("name"),
    },
}


def strategic_merge(original: Any, patch: Any, schema: str | None = "JobSetSpec") -> Any:
    """Return ``original`` with ``patch`` strategically merged in; neither input is modified.

    ``schema`` names the Go type of the top-level object in :data:`MERGE_KEYS` (``None``: no
    strategies, i.e. a JSON merge patch that keeps nulls-delete semantics). A patch that is not
    an object replaces the original, as does an original that is not one.
    """
    if isinstance(original, dict) and isinstance(patch, dict):
        return _merge_map(tree_copy(original), tree_copy(patch), schema)
    return _clean(tree_copy(patch))


def merge_resources(base: Obj | None, override: Mapping[str, Any]) -> Obj:
    """v2.3's merge of ``spec.trainer.resourcesPerNode`` onto a container's ``resources``.

    Limits and requests merge per resource name (the TrainJob's value wins), claims merge by
    name; an empty override leaves ``base`` as it was.
    """
    result = strategic_merge(base or {}, _typed_patch(override), "TrainerResourceRequirements")
    assert isinstance(result, dict)  # both arguments are dicts, so the merge yields one
    return result


def apply_runtime_patches(template: Obj, patches: list[Obj]) -> Obj:
    """Apply a TrainJob's ``spec.runtimePatches`` to a runtime's ``spec.template`` (trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go).

    Returns a new JobSetTemplateSpec (``{"metadata": ..., "spec": ...}``):

    1. JobSet ``metadata.labels``/``annotations`` = the runtime's, then every patch's
       ``trainingRuntimeSpec.template.metadata`` labels/annotations overlaid in list order;
    2. for every patch with ``template.spec``, in list order, a strategic merge of the JobSet
       spec with it (replicatedJobs by name, containers/env/volumes by name, ...);
    3. replicatedJobs put back in the runtime's original order (unknown names sort as if they
       were first, which is what Go's zero-value map lookup in ``sort.SliceStable`` does).
    """
    result: Obj = tree_copy(template)
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    for field in ("labels", "annotations"):
        overlay: dict[str, Any] | None = (
            dict(metadata[field]) if isinstance(metadata.get(field), dict) else None
        )
        for patch in patches:
            patch_meta = _get(patch, "trainingRuntimeSpec", "template", "metadata", field)
            if isinstance(patch_meta, dict) and patch_meta:
                overlay = overlay if overlay is not None else {}
                overlay.update(patch_meta)
        if overlay is not None:
            metadata[field] = overlay
    if metadata or "metadata" in result:
        result["metadata"] = metadata

    spec = result.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    original_jobs = spec.get("replicatedJobs")
    order: dict[Any, int] = {}
    if isinstance(original_jobs, list):
        for i, job in enumerate(original_jobs):
            name = job.get("name") if isinstance(job, dict) else None
            if isinstance(name, str):
                order.setdefault(name, i)
    patched = False
    for patch in patches:
        patch_spec = _get(patch, "trainingRuntimeSpec", "template", "spec")
        if not isinstance(patch_spec, dict):
            continue
        # Go marshals the typed patch first: directives cannot survive it and empty lists are
        # omitted, so an empty list in a patch never clears anything.
        spec = _merge_map(spec, _typed_patch(patch_spec), "JobSetSpec")
        patched = True
    jobs = spec.get("replicatedJobs")
    if patched and isinstance(jobs, list):
        spec["replicatedJobs"] = sorted(
            jobs,
            key=lambda job: order.get(job.get("name"), 0) if isinstance(job, dict) else 0,
        )
    result["spec"] = spec
    return result


# --- the merge -------------------------------------------------------------------------------


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _typed_patch(value: Any) -> Any:
    """What survives Go's ``json.Marshal`` of a typed patch: no nulls, no empty lists, no ``$`` keys."""
    if isinstance(value, dict):
        out: Obj = {}
        for k, v in value.items():
            if v is None or (isinstance(k, str) and k.startswith("$")):
                continue
            v = _typed_patch(v)
            if isinstance(v, list) and not v:
                continue
            out[k] = v
        return out
    if isinstance(value, list):
        return [_typed_patch(v) for v in value]
    return value


def _clean(value: Any) -> Any:
    """A patch value taken verbatim, as it reads after Go's typed round trip."""
    if isinstance(value, dict):
        return {
            k: _clean(v)
            for k, v in value.items()
            if v is not None and not (isinstance(k, str) and k.startswith("$"))
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _field(schema: str | None, key: str) -> FieldMeta:
    if schema is None:
        return _NO_META
    fields = MERGE_KEYS.get(schema)
    if fields is None:
        fields = core_patch_types().get(schema, {})
    return fields.get(key, _NO_META)


@functools.cache
def _core_patch_strategies() -> dict[str, Any]:
    # Generated from Kubernetes' published OpenAPI by tools/gen_patch_strategies.py.
    text = resources.files("kubetrain.api").joinpath("patch_strategies.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _meta(entry: Mapping[str, str]) -> FieldMeta:
    strategies = set(entry.get("strategy", "").split(","))
    merged = "merge" in strategies
    return FieldMeta(
        type=entry.get("type"),
        merge_key=entry.get("mergeKey", "") if merged else None,
        strategy="merge" if merged else "replace" if "replace" in strategies else None,
        retain_keys="retainKeys" in strategies,
    )


@functools.cache
def core_patch_types() -> Mapping[str, Mapping[str, FieldMeta]]:
    """The core kinds' patch metadata, keyed by OpenAPI definition name (``io.k8s.api...``)."""
    types = _core_patch_strategies()["types"]
    return {name: {f: _meta(m) for f, m in fields.items()} for name, fields in types.items()}


def core_kind_schema(api_version: str, kind: str) -> str | None:
    """The ``schema`` argument of :func:`strategic_merge` for a core kind, or None if unknown."""
    kinds: dict[str, str] = _core_patch_strategies()["kinds"]
    return kinds.get(f"{api_version}/{kind}")


_NO_META = FieldMeta()


def _merge_map(original: Obj, patch: Obj, schema: str | None) -> Obj:
    """Merge ``patch`` into ``original`` (which it may modify) and return the result."""
    directive = patch.get(_DIRECTIVE, None)
    if _DIRECTIVE in patch:
        if directive == "replace":
            return {k: _clean(v) for k, v in patch.items() if k != _DIRECTIVE and v is not None}
        if directive == "delete":
            return {}
        if directive != "merge":
            raise PatchError(f"unknown patch type {directive!r} in map")
        patch = {k: v for k, v in patch.items() if k != _DIRECTIVE}

    # Directive keys are rare: one scan decides whether the slower handling is needed at all.
    directives = [k for k in patch if isinstance(k, str) and k[:1] == "$"]
    if directives:
        if _RETAIN_KEYS in patch:
            _apply_retain_keys(original, patch)
        # $setElementOrder lists are handled with the list they order, before anything else.
        for key in directives:
            if key.startswith(_SET_ELEMENT_ORDER):
                _merge_with_element_order(original, patch, key, schema)

    for key, value in patch.items():
        if directives and isinstance(key, str) and key.startswith(_DELETE_FROM_PRIMITIVE):
            target = key[len(_DELETE_FROM_PRIMITIVE) :]
            current = original.get(target)
            if isinstance(current, list) and isinstance(value, list):
                original[target] = [v for v in current if v not in value]
            elif current is not None and not isinstance(value, list):
                raise PatchError(f"{key} must be a list")
            continue
        if value is None:
            original.pop(key, None)
            continue
        if key not in original:
            original[key] = _clean(value)
            continue
        current = original[key]
        meta = _field(schema, key)
        if isinstance(current, dict) and isinstance(value, dict):
            if meta.strategy == "replace":
                original[key] = _clean(value)
            else:
                original[key] = _merge_map(current, value, meta.type)
        elif isinstance(current, list) and isinstance(value, list):
            if meta.strategy == "merge" and meta.merge_key is not None:
                original[key] = _merge_list(current, value, meta)
            else:
                original[key] = _clean(value)
        else:
            original[key] = _clean(value)
    return original


def _apply_retain_keys(original: Obj, patch: Obj) -> None:
    keep = patch.pop(_RETAIN_KEYS)
    if not isinstance(keep, list):
        raise PatchError(f"{_RETAIN_KEYS} must be a list")
    for k, v in patch.items():
        if v is None or (isinstance(k, str) and k.startswith("$")):
            continue
        if k not in keep:
            raise PatchError(f"{k!r} is in the patch but not in {_RETAIN_KEYS}")
    for k in [k for k in original if k not in keep]:
        del original[k]


def _merge_with_element_order(
    original: Obj, patch: Obj, directive_key: str, schema: str | None
) -> None:
    order = patch.pop(directive_key)
    if not isinstance(order, list):
        raise PatchError(f"{directive_key} must be a list")
    key = directive_key[len(_SET_ELEMENT_ORDER) :]
    meta = _field(schema, key)
    merge_key = meta.merge_key or ""
    current = original.get(key)
    value = patch.pop(key, None)
    current_list = current if isinstance(current, list) else None
    patch_list = value if isinstance(value, list) else None
    if current_list is None and patch_list is None:
        return
    if current_list is not None and patch_list is not None:
        merged = _merge_list(current_list, patch_list, meta)
    elif patch_list is not None:
        merged = _clean(patch_list)
    else:
        assert current_list is not None
        merged = current_list
    in_order = [_key_of(item, merge_key) for item in order]
    patch_items = [m for m in merged if _key_of(m, merge_key) in in_order]
    server_only = [m for m in merged if _key_of(m, merge_key) not in in_order]
    server_order = [_key_of(m, merge_key) for m in (current_list or [])]
    original[key] = _interleave(patch_items, server_only, in_order, server_order, merge_key)


def _key_of(item: Any, merge_key: str) -> Any:
    if merge_key and isinstance(item, dict):
        return item.get(merge_key)
    return item


def _index(keys: list[Any], value: Any) -> int:
    for i, k in enumerate(keys):
        if k == value:
            return i
    return -1


def _merge_list(original: list[Any], patch: list[Any], meta: FieldMeta) -> list[Any]:
    merge_key = meta.merge_key or ""
    if not original and not patch:
        return original
    keyed = bool(merge_key) and all(
        isinstance(v, dict) and (merge_key in v or _DIRECTIVE in v) for v in (*original, *patch)
    )
    scalars = all(not isinstance(v, dict | list) for v in (*original, *patch))
    if not keyed and not scalars:
        # Go refuses mixed or key-less lists; the patch's list wins instead (see module doc).
        return [_clean(v) for v in patch]

    if scalars:
        merged: list[Any] = []
        for v in (*original, *patch):
            if v not in merged:
                merged.append(v)
        plain: list[Any] = patch
        base = original
        merge_key = ""
    else:
        base, plain, replace = list(original), [], False
        for item in patch:
            if _DIRECTIVE not in item:
                plain.append(item)
                continue
            directive = item[_DIRECTIVE]
            if directive == "delete":
                if merge_key not in item:
                    raise PatchError(f"$patch: delete needs the merge key {merge_key!r}")
                base = [o for o in base if o.get(merge_key) != item[merge_key]]
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError("merging lists cannot yet be specified in the patch")
            else:
                raise PatchError(f"unknown patch type {directive!r} in list")
        if replace:
            base, plain = [_clean(v) for v in plain], []
        merged = list(base)
        for item in plain:
            if merge_key not in item:
                continue
            at = _index([m.get(merge_key) for m in merged], item[merge_key])
            if at >= 0:
                merged[at] = _merge_map(merged[at], item, meta.type)
            else:
                merged.append(_clean(item))

    patch_keys = [_key_of(v, merge_key) for v in plain]
    patch_items = [m for m in merged if _index(patch_keys, _key_of(m, merge_key)) >= 0]
    server_only = [m for m in merged if _index(patch_keys, _key_of(m, merge_key)) < 0]
    server_order = [_key_of(m, merge_key) for m in base]
    return _interleave(patch_items, server_only, patch_keys, server_order, merge_key)


def _interleave(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
) -> list[Any]:
    """apimachinery's ``normalizeElementOrder`` + ``mergeSortedSlice``.

    Patch items are sorted by the patch order, server-only items by the original order; then the
    two are merged, taking a server-only item first only when both it and the next patch item
    appear in the original and it came earlier there. A patch item new to the list therefore goes
    in front of the server-only items not yet placed.
    """
    patch_sorted = sorted(patch_items, key=lambda m: _index(patch_order, _key_of(m, merge_key)))
    server_sorted = sorted(server_only, key=lambda m: _index(server_order, _key_of(m, merge_key)))
    out: list[Any] = []
    i = j = 0
    while i < len(server_sorted) or j < len(patch_sorted):
        if j >= len(patch_sorted):
            out.append(server_sorted[i])
            i += 1
        elif i >= len(server_sorted):
            out.append(patch_sorted[j])
            j += 1
        else:
            li = _index(server_order, _key_of(server_sorted[i], merge_key))
            ri = _index(server_order, _key_of(patch_sorted[j], merge_key))
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_sorted[i])
                i += 1
            else:
                out.append(patch_sorted[j])
                j += 1
    return out
