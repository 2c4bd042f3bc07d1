"""Reading a TrainJob's runtime snapshot (ConfigMap ``TJ-runtime-snapshot``, upstream v2.3).

The snapshot is written once, by applying the Plan's ConfigMap when none exists, and never
updated: later edits or deletion of the live runtime do not change a job that already started.
A snapshot that exists but does not belong to this TrainJob or does not describe its runtimeRef
is an error, as upstream ("invalid runtime snapshot: ...").
"""

from __future__ import annotations

import yaml

from kubetrain.api.labels import TRAINER_GROUP
from kubetrain.api.types import Obj

__all__ = ["SNAPSHOT_KEY", "SnapshotError", "runtime_from_snapshot", "snapshot_name"]

SNAPSHOT_KEY = "runtime"


class SnapshotError(Exception):
    """The snapshot ConfigMap exists but cannot be used."""


def snapshot_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-runtime-snapshot"


def runtime_from_snapshot(configmap: Obj, trainjob: Obj) -> Obj:
    """The runtime object stored in ``configmap``, checked against ``trainjob``."""
    meta = trainjob.get("metadata") or {}
    uid = meta.get("uid")
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    if not any(o.get("controller") and o.get("uid") == uid for o in owners):
        raise SnapshotError("invalid runtime snapshot: not controlled by this TrainJob")
    text = (configmap.get("data") or {}).get(SNAPSHOT_KEY)
    if not text:
        raise SnapshotError(f"invalid runtime snapshot: data key {SNAPSHOT_KEY!r} is missing")
    try:
        runtime = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SnapshotError(f"invalid runtime snapshot: {err}") from err
    if not isinstance(runtime, dict):
        raise SnapshotError("invalid runtime snapshot: not an object")
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    name = (runtime.get("metadata") or {}).get("name")
    if name != ref.get("name"):
        raise SnapshotError(
            f"invalid runtime snapshot: runtime {name!r} does not match runtimeRef {ref.get('name')!r}"
        )
    if ref.get("kind") and runtime.get("kind") != ref["kind"]:
        raise SnapshotError(
            f"invalid runtime snapshot: kind {runtime.get('kind')!r} does not match runtimeRef"
        )
    group = str(runtime.get("apiVersion") or "").partition("/")[0]
    if ref.get("apiGroup") and group != ref["apiGroup"]:
        raise SnapshotError(f"invalid runtime snapshot: group {group!r} does not match runtimeRef")
    if group != TRAINER_GROUP:
        raise SnapshotError(f"invalid runtime snapshot: unexpected apiVersion {group!r}")
    return runtime
