"""The plugin framework: capabilities, phases, registry.

For plugin authors
==================

A plugin is an object with a ``name`` and one or more *capabilities* (the Protocols below). It
lives in its own module ``kubetrain.runtime.plugins.<name>`` which exposes::

    def new(gates: FeatureGates, env: Environment) -> Plugin | None

(``None`` = not active under these gates, e.g. trainjobstatus with the gate off). Registration is
one line in ``kubetrain.runtime.plugins.REGISTRY``; that tuple is also the order in which
plugins run *within* every phase, and the order of the objects they build.

Phases, in this fixed order (upstream runs plugins from a Go map, so order within a phase is
random there; here it is ``PLUGIN_ORDER``):

1. ``validate(info, job, ctx) -> list[FieldError]`` (``Validator``) -- admission only. ``info`` is
   built from the *live* runtime with patches merged but no plugin applied. Return every problem
   with upstream's path and message; never raise for bad input. ``ctx.old`` is the previous
   TrainJob on UPDATE, ``ctx.jobset`` the live JobSet if any.
2. ``enforce_ml_policy(info, job)`` (``MLPolicyEnforcer``) -- set ``PodSet.count``, upsert env
   vars / ports / volumes / mounts into the pod specs, add init containers, rewrite
   ``info.trainer["command"]``. Skip silently unless the runtime's policy is yours
   (``info.policy("mpi")``).
3. ``enforce_pod_group_policy(info, job)`` (``PodGroupPolicyEnforcer``) -- gang scheduling: fill
   ``info.pod_labels`` / ``info.pod_annotations`` (stamped on every pod template at build time).
4. ``identify_pod_network(info, job)`` (``PodNetworkIdentifier``) -- the JobSet plugin fills
   ``PodSet.endpoints``; read them in phase 6 (MPI hostfile).
5. ``sync_parallel_count(info)`` (``CountSyncer``) -- the JobSet plugin writes counts into
   ``parallelism``/``completions``.
6. ``build(info, job, ctx) -> list[Obj]`` (``ComponentBuilder``) -- return finished objects
   (apiVersion, kind, metadata with namespace and ``owner_reference(info)``). Return ``[]`` for
   objects that must not be (re)applied, e.g. a Secret already in ``ctx.existing``.
7. ``trainjob_status(job, jobset, now)`` (``StatusProvider``) -- exactly one plugin (JobSet).

Rules: phases 2-6 must be deterministic functions of their inputs (no clock, no I/O, no global
randomness: use ``ctx.env.ssh_keypair``). A reconcile-time failure (upstream returns an error
from NewObjects) is ``raise RenderError(FieldError(path, reason))``; ``path`` may be empty.

Helpers: ``kubetrain.runtime.podspec`` (``upsert_env``/``upsert_port``/``upsert_volume``/
``upsert_volume_mount`` with upstream's replace-in-place-else-append rule, ``env_value``,
``env_field_ref``, ``find_container``, ``tree_copy``); ``RuntimeInfo`` look-ups
(``policy(kind)``, ``pod_set(name)``, ``trainer_pod_set()``, ``trainer_container()``,
``trainer_resources()``); ``kubetrain.runtime.resources`` (GPU/CPU counts);
``owner_reference(info)`` and ``object_meta(info, name)`` below.

Shared leaf modules the core calls: ``kubetrain.runtime.smp`` (``apply_runtime_patches(template,
patches)``: v2.3 strategic merge of every patch into the runtime's ``spec.template``, labels and
annotations overlaid, replicatedJobs back in runtime order; ``merge_resources`` for
``resourcesPerNode``), ``kubetrain.runtime.torchtune`` (``validate_torchtune``,
``torchtune_command``), ``kubetrain.runtime.podgroup`` (pod requests, PodGroup totals),
``kubetrain.runtime.sshkeys`` (key-pair factories for ``Environment.ssh_keypair``).

Start-up: ``Framework(plugins)`` sorts plugins into phase lists once and rejects ambiguous
set-ups (duplicate names, a plugin with no capability, two status providers or count syncers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable

from kubetrain.api.access import dicts, obj_at
from kubetrain.api.core import ObjectMeta, OwnerReference
from kubetrain.api.errors import FieldError
from kubetrain.api.labels import TRAINER_API_VERSION, TRAINJOB_KIND
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj

__all__ = [
    "PHASES",
    "BuildContext",
    "ComponentBuilder",
    "CountSyncer",
    "Existing",
    "ExistingReader",
    "Framework",
    "FrameworkError",
    "MLPolicyEnforcer",
    "ObjectRef",
    "Plugin",
    "PodGroupPolicyEnforcer",
    "PodNetworkIdentifier",
    "RenderError",
    "StatusProvider",
    "ValidationContext",
    "Validator",
    "object_meta",
    "owner_reference",
    "reserved_env_error",
]

PHASES = (
    "validate",
    "enforce_ml_policy",
    "enforce_pod_group_policy",
    "identify_pod_network",
    "sync_parallel_count",
    "build",
    "trainjob_status",
)


class FrameworkError(Exception):
    """An ambiguous or broken plugin set-up, detected at start-up."""


class RenderError(Exception):
    """Upstream's reconcile would fail (NewObjects returned an error); nothing is applied."""

    def __init__(self, *errors: FieldError) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors: list[FieldError] = list(errors)


@dataclass(frozen=True, slots=True)
class Existing:
    """Objects that already exist in the TrainJob's namespace, keyed by (kind, name).

    Rendering reads it for upstream's "only if absent" and "never update a running JobSet" rules:
    the JobSet ``TJ``, the snapshot ``TJ-runtime-snapshot``, the Secret ``TJ-mpi-ssh-auth``, the
    PodGroup ``TJ``. Empty for a first reconcile or a CLI dry run.
    """

    objects: Mapping[tuple[str, str], Obj] = field(default_factory=dict)

    @classmethod
    def of(cls, *objects: Obj) -> Existing:
        """Index objects by their ``kind`` and ``metadata.name``."""
        return cls({(o.get("kind", ""), obj_at(o, "metadata").get("name", "")): o for o in objects})

    def get(self, kind: str, name: str) -> Obj | None:
        """The existing object, or None."""
        return self.objects.get((kind, name))


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What builders may read besides the info and the TrainJob."""

    gates: FeatureGates
    env: Environment
    existing: Existing


@dataclass(frozen=True, slots=True)
class ValidationContext:
    """What validators may read besides the info and the new TrainJob."""

    gates: FeatureGates
    old: Obj | None = None
    """The TrainJob before the update (None on CREATE)."""
    jobset: Obj | None = None
    """The live JobSet of the TrainJob, if any (runtimePatches rules)."""
    priority_classes: frozenset[str] | None = None
    """Names of existing PriorityClasses; None = unknown (the check is skipped)."""
    runtime: Obj | None = None
    """The live runtime as stored (no patches merged), for checks about what it declares."""


class Plugin(Protocol):
    """Every plugin has a name, unique in the registry."""

    name: str


@runtime_checkable
class Validator(Protocol):
    """Admission checks for TrainJobs (upstream CustomValidationPlugin)."""

    name: str

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]: ...


@runtime_checkable
class MLPolicyEnforcer(Protocol):
    """Counts, env vars, ports, volumes for the ML framework (upstream EnforceMLPolicyPlugin)."""

    name: str

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None: ...


@runtime_checkable
class PodGroupPolicyEnforcer(Protocol):
    """Pod labels/annotations for gang scheduling (upstream EnforcePodGroupPolicyPlugin)."""

    name: str

    def enforce_pod_group_policy(self, info: RuntimeInfo, job: Obj) -> None: ...


@runtime_checkable
class PodNetworkIdentifier(Protocol):
    """Fills ``PodSet.endpoints`` (upstream PodNetworkPlugin)."""

    name: str

    def identify_pod_network(self, info: RuntimeInfo, job: Obj) -> None: ...


@runtime_checkable
class CountSyncer(Protocol):
    """Writes PodSet counts into the JobSet spec before any build (upstream SyncParallelCount)."""

    name: str

    def sync_parallel_count(self, info: RuntimeInfo) -> None: ...


@runtime_checkable
class ComponentBuilder(Protocol):
    """Produces objects to apply (upstream ComponentBuilderPlugin.Build)."""

    name: str

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]: ...


class ObjectRef(NamedTuple):
    """One object by apiVersion, kind and name, in the TrainJob's namespace."""

    api_version: str
    kind: str
    name: str


@runtime_checkable
class ExistingReader(Protocol):
    """Names the objects its ``build`` reads back from ``BuildContext.existing`` that no informer
    caches (kept once created, like the MPI SSH Secret), so the controller fetches them without
    knowing which plugin wants what. Runs before phase 1, on the runtime's spec."""

    name: str

    def existing_refs(self, trainjob_name: str, runtime_spec: Obj) -> list[ObjectRef]: ...


@runtime_checkable
class StatusProvider(Protocol):
    """Derives TrainJob status from the child objects (upstream TrainJobStatusPlugin)."""

    name: str

    def trainjob_status(self, job: Obj, jobset: Obj | None, now: datetime) -> Obj | None: ...


def owner_reference(info: RuntimeInfo) -> OwnerReference:
    """The single controller ownerReference every object created for a TrainJob carries."""
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": TRAINJOB_KIND,
        "name": info.trainjob_name,
        "uid": info.trainjob_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(info: RuntimeInfo, name: str) -> ObjectMeta:
    """``metadata`` for a child object: name, the TrainJob's namespace, the ownerReference."""
    return {
        "name": name,
        "namespace": info.trainjob_namespace,
        "ownerReferences": [owner_reference(info)],
    }


class Framework:
    """Plugins sorted into phase lists once; runs phases in the documented order."""

    def __init__(self, plugins: Sequence[object]) -> None:
        seen: set[str] = set()
        for p in plugins:
            name = getattr(p, "name", None)
            if not isinstance(name, str) or not name:
                raise FrameworkError(f"plugin {p!r} has no name")
            if name in seen:
                raise FrameworkError(f"plugin {name!r} registered twice")
            seen.add(name)
        self.plugins: tuple[object, ...] = tuple(plugins)
        self.validators = [p for p in plugins if isinstance(p, Validator)]
        self.ml_policy = [p for p in plugins if isinstance(p, MLPolicyEnforcer)]
        self.pod_group_policy = [p for p in plugins if isinstance(p, PodGroupPolicyEnforcer)]
        self.pod_network = [p for p in plugins if isinstance(p, PodNetworkIdentifier)]
        self.count_syncers = [p for p in plugins if isinstance(p, CountSyncer)]
        self.builders = [p for p in plugins if isinstance(p, ComponentBuilder)]
        self.existing_readers = [p for p in plugins if isinstance(p, ExistingReader)]
        status = [p for p in plugins if isinstance(p, StatusProvider)]
        for p in plugins:
            if not any(
                p in phase
                for phase in (
                    self.validators,
                    self.ml_policy,
                    self.pod_group_policy,
                    self.pod_network,
                    self.count_syncers,
                    self.builders,
                    self.existing_readers,
                    status,
                )
            ):
                raise FrameworkError(f"plugin {getattr(p, 'name', p)!r} implements no capability")
        if len(status) > 1:
            names = ", ".join(p.name for p in status)
            raise FrameworkError(f"more than one TrainJob status provider: {names}")
        if len(self.count_syncers) > 1:
            names = ", ".join(p.name for p in self.count_syncers)
            raise FrameworkError(f"more than one parallel-count syncer: {names}")
        self.status_provider: StatusProvider | None = status[0] if status else None

    def run_validation(
        self, info: RuntimeInfo, job: Obj, ctx: ValidationContext
    ) -> list[FieldError]:
        """Phase 1: every validator's errors, in plugin order."""
        errors: list[FieldError] = []
        for p in self.validators:
            errors.extend(p.validate(info, job, ctx))
        return errors

    def run_enforce(self, info: RuntimeInfo, job: Obj) -> None:
        """Phases 2-4."""
        for p in self.ml_policy:
            p.enforce_ml_policy(info, job)
        for q in self.pod_group_policy:
            q.enforce_pod_group_policy(info, job)
        for r in self.pod_network:
            r.identify_pod_network(info, job)

    def existing_refs(self, trainjob_name: str, runtime_spec: Obj) -> list[ObjectRef]:
        """Every object the builders will look for in ``existing``, in plugin order."""
        return [
            ref
            for p in self.existing_readers
            for ref in p.existing_refs(trainjob_name, runtime_spec)
        ]

    def run_build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        """Phases 5-6: counts are synced on all syncers before any builder runs."""
        for s in self.count_syncers:
            s.sync_parallel_count(info)
        objects: list[Obj] = []
        for b in self.builders:
            objects.extend(b.build(info, job, ctx))
        return objects


def reserved_env_error(
    trainer: Mapping[str, Any] | None, reserved: frozenset[str]
) -> FieldError | None:
    """Upstream's error for ``spec.trainer.env`` naming variables a plugin sets itself (torch, MPI)."""
    env = trainer.get("env") if trainer is not None else None
    names = {e["name"] for e in dicts(env) if isinstance(e.get("name"), str)}
    clash = sorted(names & reserved)
    if not clash:
        return None
    return FieldError(
        "spec.trainer.env",
        f"must not have reserved envs, invalid envs configured: [{' '.join(clash)}]",
    )
