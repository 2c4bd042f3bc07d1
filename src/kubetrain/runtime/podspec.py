"""Small helpers that edit JSON-like Kubernetes objects in place.

Upstream's plugins merge env vars, ports, volumes and mounts with one rule: *replace the entry
with the same key where it is, append otherwise*. The position matters because rendered output
is compared byte for byte, so every plugin goes through these helpers instead of writing lists
by hand. Keys: env vars by ``name``, ports by ``containerPort`` *or* ``name``, volumes by
``name``, volume mounts by ``mountPath``.

``tree_copy`` is a fast copy for JSON trees (dict/list/scalars); ``copy.deepcopy`` is an order of
magnitude slower and rendering copies the runtime on every call.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubetrain.api.types import Obj

__all__ = [
    "Obj",
    "child_list",
    "child_obj",
    "env_field_ref",
    "env_value",
    "find_container",
    "find_named",
    "tree_copy",
    "upsert_env",
    "upsert_port",
    "upsert_volume",
    "upsert_volume_mount",
]


def tree_copy(value: Any) -> Any:
    """Copy a JSON tree (dicts, lists, scalars). Tuples become lists, like a JSON round trip."""
    if isinstance(value, dict):
        return {
            k: tree_copy(v) if isinstance(v, dict | list | tuple) else v for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [tree_copy(v) if isinstance(v, dict | list | tuple) else v for v in value]
    return value


def child_obj(parent: Obj, key: str) -> Obj:
    """``parent[key]`` as a dict, created (and stored) when absent or null."""
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def child_list(parent: Obj, key: str) -> list[Any]:
    """``parent[key]`` as a list, created (and stored) when absent or null."""
    value = parent.get(key)
    if not isinstance(value, list):
        value = []
        parent[key] = value
    return value


def find_named(items: Any, name: str) -> Obj | None:
    """The first dict in ``items`` whose ``name`` is ``name`` (tolerates junk entries)."""
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("name") == name:
                return item
    return None


def find_container(pod_spec: Any, name: str, *, init: bool = False) -> Obj | None:
    """Container ``name`` of a pod spec; with ``init=True`` init containers are searched after."""
    if not isinstance(pod_spec, dict):
        return None
    found = find_named(pod_spec.get("containers"), name)
    if found is None and init:
        found = find_named(pod_spec.get("initContainers"), name)
    return found


def _upsert_by(items: list[Any], new: Iterable[Obj], key: str) -> None:
    # One index of the first entry per key, instead of a scan per upserted item: env lists are
    # upserted several times per render. Entries without the key (None) match each other, as
    # upstream's pointer comparison of two nil names does.
    index: dict[Any, int] = {}
    for i, existing in enumerate(items):
        if isinstance(existing, dict):
            k = existing.get(key)
            if isinstance(k, Hashable) and k not in index:
                index[k] = i
    for item in new:
        k = item.get(key)
        pos = index.get(k) if isinstance(k, Hashable) else None
        if pos is not None:
            items[pos] = item
        else:
            if isinstance(k, Hashable):
                index[k] = len(items)
            items.append(item)


def _upsert_port(items: list[Any], new: Iterable[Obj]) -> None:
    # Ports match on containerPort *or* name, so no single index will do; lists are short.
    for item in new:
        for i, existing in enumerate(items):
            if isinstance(existing, dict) and (
                existing.get("containerPort") == item.get("containerPort")
                or existing.get("name") == item.get("name")
            ):
                items[i] = item
                break
        else:
            items.append(item)


def upsert_env(container: Obj, *env: Obj) -> None:
    """Upsert env vars into ``container["env"]`` by name, in order."""
    if env:  # upserting nothing must not leave an empty list behind
        _upsert_by(child_list(container, "env"), env, "name")


def upsert_port(container: Obj, *ports: Obj) -> None:
    """Upsert ports into ``container["ports"]`` by containerPort or name."""
    if ports:
        _upsert_port(child_list(container, "ports"), ports)


def upsert_volume_mount(container: Obj, *mounts: Obj) -> None:
    """Upsert volume mounts into ``container["volumeMounts"]`` by mountPath."""
    if mounts:
        _upsert_by(child_list(container, "volumeMounts"), mounts, "mountPath")


def upsert_volume(pod_spec: Obj, *volumes: Obj) -> None:
    """Upsert volumes into ``pod_spec["volumes"]`` by name."""
    if volumes:
        _upsert_by(child_list(pod_spec, "volumes"), volumes, "name")


def env_value(name: str, value: str) -> Obj:
    """``{name, value}``; Kubernetes env values are always strings."""
    return {"name": name, "value": value}


def env_field_ref(name: str, field_path: str) -> Obj:
    """An env var from the downward API, e.g. the job-completion-index annotation."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}
