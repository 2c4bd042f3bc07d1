"""``render``: one TrainJob + its runtime -> exactly the objects upstream v2.3's reconcile applies.

Pure: the caller passes what a reconcile would read (the runtime, the objects that already exist,
``now`` for condition timestamps) and applies the returned ``Plan``. Order of ``Plan.objects``:
the runtime snapshot ConfigMap (only when none exists yet), then each plugin's objects in
``PLUGIN_ORDER`` (MPI Secret/ConfigMap, Flux ConfigMap/Secret, TJ-tls-config, PodGroup, JobSet
last).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import yaml

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.bounds import trainjob_bound_errors
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import (
    CLUSTER_TRAINING_RUNTIME,
    TRAINER_GROUP,
    TRAINING_RUNTIME,
    new_runtime_info,
    registry_key,
    runtime_ref,
)
from kubetrain.runtime.framework import (
    BuildContext,
    Existing,
    ObjectRef,
    RenderError,
    object_meta,
)
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.plugins import framework_for
from kubetrain.runtime.podspec import Obj
from kubetrain.runtime.quantity_canon import canonicalize_jobset
from kubetrain.runtime.status import derive, is_finished

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SUPPORTED_RUNTIME_KEYS",
    "Plan",
    "existing_refs",
    "parse_snapshot",
    "render",
    "runtime_not_found",
    "snapshot_configmap",
    "snapshot_name",
]

SNAPSHOT_SUFFIX = "-runtime-snapshot"


def snapshot_name(trainjob_name: str) -> str:
    """The ConfigMap holding a TrainJob's runtime snapshot (upstream v2.3's name)."""
    return trainjob_name + SNAPSHOT_SUFFIX


SUPPORTED_RUNTIME_KEYS = (
    f"{TRAINING_RUNTIME}.{TRAINER_GROUP}",
    f"{CLUSTER_TRAINING_RUNTIME}.{TRAINER_GROUP}",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

try:  # libyaml when present: snapshots are parsed on every reconcile after the first
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconcile of a TrainJob would do."""

    objects: list[Obj]
    """Objects to server-side apply, in order (field manager ``trainer``, force)."""
    warnings: list[str] = field(default_factory=list)
    """Human-readable notes (nothing upstream writes anywhere)."""
    trainjob_status: Obj = field(default_factory=dict)
    """The TrainJob ``.status`` after this reconcile (first reconcile: e.g. Suspended)."""
    requeue_after: float | None = None
    """Seconds until the active deadline, when one is pending."""
    delete_jobset: bool = False
    """The active deadline passed: delete the JobSet."""


def runtime_not_found(kind: str, name: str) -> str:
    """Upstream's reconcile error when the referenced runtime does not exist (no snapshot)."""
    if kind == TRAINING_RUNTIME:
        return f'TrainingRuntime specified in TrainJob is not found: trainingruntimes.trainer.kubeflow.org "{name}" not found'
    return (
        "not found ClusterTrainingRuntime specified in TrainJob: "
        f'clustertrainingruntimes.trainer.kubeflow.org "{name}" not found'
    )


def parse_snapshot(text: str) -> Any:
    """The YAML document of a snapshot ConfigMap's ``runtime`` key; raises ``yaml.YAMLError``.

    Every TrainJob of one runtime snapshots the same text and it is read on every reconcile
    after the first, so parses are remembered by text (each caller gets its own copy). A copy
    is decoded from the parse's JSON, which is several times cheaper than ``copy.deepcopy``;
    a document JSON does not carry exactly (YAML timestamps, non-string keys) is deep-copied.
    """
    parsed = _SNAPSHOT_PARSES.get(text)
    if parsed is None:
        parsed = yaml.load(text, Loader=_Loader)
        if len(_SNAPSHOT_PARSES) >= 64:
            _SNAPSHOT_PARSES.pop(next(iter(_SNAPSHOT_PARSES)))
        _SNAPSHOT_PARSES[text] = parsed = _Parsed(parsed, _exact_json(parsed))
    if parsed.json is not None:
        return msgspec.json.decode(parsed.json)
    return copy.deepcopy(parsed.document)


@dataclass(frozen=True, slots=True)
class _Parsed:
    document: Any
    json: bytes | None  # the document as JSON, when decoding it gives back an equal document


def _exact_json(document: Any) -> bytes | None:
    try:
        encoded = msgspec.json.encode(document)
    except (TypeError, ValueError):
        return None
    return encoded if msgspec.json.decode(encoded) == document else None


_SNAPSHOT_PARSES: dict[str, _Parsed] = {}


def _runtime_yaml(runtime: Obj) -> str:
    # PyYAML's representer is pure Python and dominated render time; the same runtime is
    # snapshotted for every TrainJob that uses it, so memoise on its content (a C-speed JSON key).
    try:
        key = json.dumps(runtime, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return _dump_runtime(runtime)
    text = _YAML_CACHE.get(key)
    if text is None:
        text = _dump_runtime(runtime)
        if len(_YAML_CACHE) >= 64:
            _YAML_CACHE.pop(next(iter(_YAML_CACHE)))
        _YAML_CACHE[key] = text
    return text


_YAML_CACHE: dict[str, str] = {}


class _GoYAMLDumper(yaml.SafeDumper):
    """Scalar styles as sigs.k8s.io/yaml (go-yaml v2) writes them: plain when possible, literal
    blocks for multi-line text, otherwise double quotes (PyYAML would pick single quotes)."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_GoYAMLDumper.add_representer(str, _represent_str)


def _dump_runtime(runtime: Obj) -> str:
    # sigs.k8s.io/yaml.Marshal of the typed object: JSON field names, keys sorted. (With
    # apimachinery v0.36 a zero creationTimestamp is omitzero, so nothing is added for it.)
    text: str = yaml.dump(
        runtime, Dumper=_GoYAMLDumper, sort_keys=True, default_flow_style=False, allow_unicode=True
    )
    return text


def snapshot_configmap(info: RuntimeInfo, runtime: Obj) -> Obj:
    """ConfigMap ``TJ-runtime-snapshot`` holding the whole runtime as YAML (v2.3, trainer v2.3.0 pkg/runtime/core/snapshot.go)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(info, snapshot_name(info.trainjob_name)),
        "data": {"runtime": _runtime_yaml(runtime)},
    }


def _read_snapshot(job: Obj, cm: Obj, uid: str) -> Obj:
    owners = obj_at(cm, "metadata").get("ownerReferences")
    controller = (
        next(
            (o for o in owners if isinstance(o, dict) and o.get("controller") is True),
            None,
        )
        if isinstance(owners, list)
        else None
    )
    if controller is None or controller.get("uid") != uid:
        raise RenderError(
            FieldError(
                "",
                "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
            )
        )
    text = obj_at(cm, "data").get("runtime")
    if not isinstance(text, str):
        raise RenderError(
            FieldError(
                "", 'invalid runtime snapshot: snapshot ConfigMap missing "runtime" data key'
            )
        )
    try:
        runtime = parse_snapshot(text)
    except yaml.YAMLError as exc:
        raise RenderError(
            FieldError("", f"invalid runtime snapshot: unable to unmarshal the snapshot: {exc}")
        ) from exc
    runtime = as_dict(runtime)
    ref = obj_at(job, "spec", "runtimeRef")
    api_version = str(runtime.get("apiVersion", ""))
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    kind = str(runtime.get("kind", ""))
    name = str(obj_at(runtime, "metadata").get("name", ""))
    want_name = str(ref.get("name", ""))
    want_kind, want_group = ref.get("kind"), ref.get("apiGroup")
    if (
        (want_kind is not None and kind != want_kind)
        or (want_group is not None and group != want_group)
        or (name != want_name)
    ):
        raise RenderError(
            FieldError(
                "",
                "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a runtime with"
                f' name, api group and kind of "{want_name}", "{want_group if want_group is not None else "<any>"}",'
                f' "{want_kind if want_kind is not None else "<any>"}" but found runtime with name, api group and'
                f' kind of "{name}", "{group}", "{kind}"',
            )
        )
    return runtime


def existing_refs(
    trainjob: Obj,
    runtime: Obj,
    *,
    gates: FeatureGates | None = None,
    environment: Environment | None = None,
) -> list[ObjectRef]:
    """The children ``render`` reads back from ``existing`` that a controller does not cache
    (each plugin names its own), for the TrainJob and its runtime (live or snapshot)."""
    framework = framework_for(gates or FeatureGates(), environment or Environment())
    name = str(obj_at(trainjob, "metadata").get("name", ""))
    return framework.existing_refs(name, obj_at(runtime, "spec"))


def render(
    trainjob: Obj,
    runtime: Obj | None,
    *,
    gates: FeatureGates | None = None,
    environment: Environment | None = None,
    existing: Existing | None = None,
    now: datetime | None = None,
) -> Plan:
    """The objects one reconcile applies and the TrainJob status it writes.

    ``runtime`` is the live runtime the TrainJob references (None when it does not exist; the
    snapshot in ``existing`` is used first, as upstream does). Raises ``RenderError`` where
    upstream's reconcile fails (runtime missing, bad snapshot, plugin errors); validate first
    for admission errors. ``now`` stamps new conditions (default: the Unix epoch, so output
    depends only on the arguments).
    """
    gates = gates if gates is not None else FeatureGates()
    env = environment if environment is not None else Environment()
    existing = existing if existing is not None else Existing()
    stamp = now if now is not None else _EPOCH
    spec = obj_at(trainjob, "spec")
    key = registry_key(trainjob)
    name = str(obj_at(trainjob, "metadata").get("name", ""))
    existing_jobset = existing.get("JobSet", name)

    managed_by = spec.get("managedBy")
    if isinstance(managed_by, str) and managed_by != "trainer.kubeflow.org/trainjob-controller":
        # Another controller (MultiKueue) owns it: upstream skips the TrainJob entirely.
        return Plan(objects=[], trainjob_status=obj_at(trainjob, "status"))

    if key not in SUPPORTED_RUNTIME_KEYS:
        update = derive(trainjob, existing_jobset, now=stamp, unsupported_runtime=key)
        return Plan(
            objects=[],
            warnings=[f"unsupported runtime: {key}"],
            trainjob_status=update.status,
            requeue_after=update.requeue_after,
            delete_jobset=update.delete_jobset,
        )

    # Finished jobs are not re-applied; a Failed condition that is about to be re-derived does not count.
    status_now = obj_at(trainjob, "status")
    conds = [
        c
        for c in list_at(status_now, "conditions")
        if not (
            isinstance(c, dict)
            and c.get("type") == "Failed"
            and c.get("reason") != "DeadlineExceeded"
        )
    ]
    objects: list[Obj] = []
    applied_jobset = existing_jobset
    if not is_finished({"conditions": conds}):
        objects = _new_objects(trainjob, runtime, gates, env, existing)
        for o in objects:
            if o.get("kind") == "JobSet":
                applied_jobset = {**o, "status": obj_at(existing_jobset, "status")}
    update = derive(trainjob, applied_jobset, now=stamp)
    return Plan(
        objects=objects,
        trainjob_status=update.status,
        requeue_after=update.requeue_after,
        delete_jobset=update.delete_jobset,
    )


def _new_objects(
    job: Obj, runtime: Obj | None, gates: FeatureGates, env: Environment, existing: Existing
) -> list[Obj]:
    framework = framework_for(gates, env)
    meta = obj_at(job, "metadata")
    name = str(meta.get("name", ""))
    uid = (
        meta.get("uid")
        if isinstance(meta.get("uid"), str) and meta.get("uid")
        else env.uid_placeholder
    )
    _, kind, ref_name = runtime_ref(job)
    objects: list[Obj] = []
    snapshot = existing.get("ConfigMap", snapshot_name(name))
    if snapshot is not None:
        runtime = _read_snapshot(job, snapshot, str(uid))
    elif runtime is None:
        raise RenderError(FieldError("", runtime_not_found(kind, ref_name)))
    # Admission checks these too; a job stored before (or a runtime whose webhook is off)
    # must fail here with the reason, not build two billion endpoints or nothing at all.
    unrunnable = trainjob_bound_errors(job, runtime, max_num_nodes=env.max_num_nodes)
    if unrunnable:
        raise RenderError(*unrunnable)
    info = new_runtime_info(job, runtime, env)
    if snapshot is None:
        objects.append(snapshot_configmap(info, runtime))
    framework.run_enforce(info, job)
    built = framework.run_build(info, job, BuildContext(gates=gates, env=env, existing=existing))
    for o in built:
        if o.get("kind") == "JobSet":
            canonicalize_jobset(o)
    objects.extend(built)
    return objects
