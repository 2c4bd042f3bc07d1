"""The TrainJob reconciler: level-triggered, upstream's flow, terminal states sticky.

One reconcile, for the TrainJob as the cache holds it:

1. gone, being deleted, or ``spec.managedBy`` another controller → nothing (no status writes);
2. finished (``Complete`` or ``Failed`` True) → status only, from the JobSet while it exists;
3. otherwise: resolve the runtime (the snapshot ConfigMap first, else the live runtime) and
   render (``kubetrain.runtime.render``: the objects, and the status upstream's steps 3 and 5-7
   give: Suspended/Resumed, JobSet's Complete/Failed and jobsStatus, the active deadline);
   if the deadline has passed, delete the JobSet instead of applying; else server-side apply
   the Plan with field manager ``trainer`` (force), ConfigMaps and Secrets before PodGroups
   before the JobSet, so pods never start before what they mount;
4. a terminal state already reached is kept exactly (``conditions.keep_terminal``);
5. status written through the ``status`` subresource as a JSON merge patch of what changed,
   never touching ``trainerStatus`` (owned by the status server's manager ``trainer-status``);
6. Events for each transition of the job's state and each failed apply; requeue after the
   deadline's remaining time.

Divergences from upstream (trainer v2.3.0 pkg/controller/trainjob_controller.go), each on purpose:
- Terminal is terminal. Upstream drops a non-deadline ``Failed`` at the start of every reconcile
  and re-applies the Plan, so deleting a finished TrainJob's JobSet re-creates it and runs the job
  again (upstream bugs #3737, #3779). Here a TrainJob with ``Complete`` or ``Failed`` True is never
  applied again, and its terminal condition never changes.
- Failures that would stop a job from ever running are visible in its status. Upstream only
  emits an Event and retries forever, so the official SDK shows such a job as ``Created`` for
  ever (upstream bug #3671). Here, while no JobSet exists:
  * the runtime is still missing ``runtime_grace`` seconds after the TrainJob was created (a
    direct GET confirms it, not the cache) → ``Failed``, reason ``TrainingRuntimeNotFound``;
  * render fails (deterministic for a given TrainJob and snapshot) or the API server rejects a
    rendered object as invalid (400/422) → ``Failed``, reason ``TrainJobResourcesCreationFailed``.
  ``Failed`` is the one condition the SDK reads as a final state, so ``wait_for_job_status``
  stops with an error instead of hanging. Transient errors (network, 5xx, conflicts, RBAC) only
  produce the Warning Event and a backoff retry, as upstream. A job whose JobSet exists is never
  failed for a controller-side error: its pods keep running and its status keeps being derived.
- An unknown runtime kind fails the job with upstream's ``TrainingRuntimeNotSupported`` without
  upstream's latent nil-runtime panic.
- An expired deadline is checked before applying, so a job whose deadline passed while the
  controller was down never gets a JobSet (upstream creates it, then deletes it).
- A JobSet or snapshot still controlled by an earlier TrainJob of the same name (deleted and
  re-created before garbage collection finished) is neither adopted nor read: the new job
  waits for it to go, instead of inheriting the old job's Complete/Failed.
- An Event tells of each transition (Normal ``Suspended``, ``Resumed``, ``Completed``; Warning
  with the ``Failed`` reason), which ``kubectl describe`` and the SDK's ``get_job_events`` show;
  upstream records only ``TrainJobResourcesCreationFailed``. As upstream, a successful apply
  records nothing: an Event per created JobSet would be one more API write for every TrainJob.
- ConfigMaps the cache already shows with the Plan's exact content are not re-applied
  (upstream sends the same apply on every reconcile).
- The watch event of the controller's own write (an applied child, the status it wrote) queues
  no reconcile when the write's answer carried nothing else (``Informer.observe(acted_on=)``),
  also when that event is read before the answer (``Informer.writing`` holds it back until
  then); upstream reconciles once more per such event and finds nothing to do.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import yaml

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.labels import (
    CLUSTER_TRAINING_RUNTIME_KIND,
    DEFAULT_MANAGED_BY,
    FIELD_MANAGER,
    TRAINER_GROUP,
    TRAINING_RUNTIME_KIND,
)
from kubetrain.api.types import Obj
from kubetrain.controller import conditions as c
from kubetrain.controller.events import EventRecorder
from kubetrain.controller.rendering import Outcome, Renderer, RenderFailed
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.informer import Informer
from kubetrain.kube.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    CONFIGMAP,
    JOBSET,
    TRAINING_RUNTIME,
    TRAINJOB,
    Kind,
    kind_for,
)
from kubetrain.runtime.core import runtime_ref
from kubetrain.runtime.render import parse_snapshot, snapshot_name

__all__ = [
    "CREATION_FAILED",
    "RUNTIME_NOT_FOUND",
    "RUNTIME_NOT_SUPPORTED",
    "Caches",
    "ReconcileError",
    "TrainJobReconciler",
    "read_through",
]

log = logging.getLogger(__name__)

CREATION_FAILED = "TrainJobResourcesCreationFailed"
RUNTIME_NOT_FOUND = "TrainingRuntimeNotFound"
RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
_NOTE_LIMIT = 950
_APPLIED_MEMORY = 50_000  # objects whose last apply is remembered (a few dozen bytes each)


class ReconcileError(Exception):
    """A failure worth retrying with backoff (reported as a Warning Event first)."""


@dataclass(frozen=True, slots=True)
class Caches:
    """The informers a TrainJob reconcile reads instead of the API server."""

    trainjobs: Informer
    jobsets: Informer
    configmaps: Informer
    training_runtimes: Informer
    cluster_training_runtimes: Informer

    def get(self, kind: Kind, name: str, namespace: str = "") -> Obj | None:
        """The cached ``kind`` object, or None when no informer caches that kind or this
        object (not yet, another namespace, not controlled by a TrainJob, or absent)."""
        for informer in (self.training_runtimes, self.cluster_training_runtimes, self.jobsets,
                         self.configmaps, self.trainjobs):  # fmt: skip
            if informer.kind is kind:
                return informer.get(name, namespace)
        return None


async def read_through(
    client: KubeClient, caches: Caches | None, kind: Kind, name: str, namespace: str | None
) -> Obj | None:
    """The ``kind`` object as the informers hold it, else as the API server has it (a cache
    may lag behind an object created a moment ago, or not hold that kind); None when the
    server has none either. Other API errors and transport errors propagate."""
    ns = namespace if kind.namespaced else None
    cached = caches.get(kind, name, ns or "") if caches is not None else None
    if cached is not None:
        return cached
    try:
        return await client.get(kind.api_version, kind.plural, name, namespace=ns)
    except ApiError as err:
        if err.not_found:
            return None
        raise


class _Permanent(Exception):
    """A failure no retry can fix while nothing changes: the job fails with ``reason``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(slots=True)
class _Pass:
    """What one reconcile learned, for status and events."""

    jobset: Obj | None
    requeue_after: float | None = None
    error: ReconcileError | None = None


_APPLY_ORDER = {"ConfigMap": 0, "Secret": 0, "PodGroup": 1, "JobSet": 3}


class TrainJobReconciler:
    def __init__(
        self,
        client: KubeClient,
        caches: Caches,
        recorder: EventRecorder,
        renderer: Renderer,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        runtime_grace: float = 10.0,
    ) -> None:
        self._client = client
        self._caches = caches
        self._events = recorder
        self._renderer = renderer
        self._clock = clock
        self._grace = runtime_grace
        # (kind, namespace, name) → (resourceVersion our apply returned, fingerprint of what we
        # applied): lets an unchanged re-apply be skipped (see _already_live).
        self._applied: dict[tuple[str, str, str], tuple[str, str]] = {}

    async def reconcile(self, namespace: str, name: str) -> float | None:
        """Reconcile one TrainJob; returns seconds until it wants to run again (or None).

        Raises ``ReconcileError`` (after recording a Warning Event) when it should be retried.
        """
        trainjob = self._caches.trainjobs.get(name, namespace)
        if trainjob is None or obj_at(trainjob, "metadata").get("deletionTimestamp"):
            return None  # no finalizer on TrainJobs: garbage collection removes the children
        spec = obj_at(trainjob, "spec")
        if spec.get("managedBy") not in (None, "", DEFAULT_MANAGED_BY):
            return None
        now = self._clock()
        old_status: Obj = copy.deepcopy(obj_at(trainjob, "status"))
        step = _Pass(jobset=self._caches.jobsets.get(name, namespace))

        if c.is_finished(old_status):
            # Terminal: nothing is applied again; status only follows the JobSet while it
            # exists (jobsStatus), and keep_terminal holds the final condition. A deadline
            # failure whose JobSet deletion failed earlier deletes it now.
            if _deadline_failed(old_status) and step.jobset is not None:
                await self._delete_jobset_or_record(trainjob, step)
            outcome = self._renderer.derive(trainjob, step.jobset, now)
        else:
            outcome = await self._plan(trainjob, step, now)
            if outcome.delete_jobset:
                # Checked before applying: an expired job never gets (or keeps) a JobSet.
                await self._delete_jobset_or_record(trainjob, step)
            else:
                try:
                    await self._apply(trainjob, step, outcome)
                except _Permanent as failure:
                    outcome = self._failed(trainjob, step, failure, now)
            step.requeue_after = _sooner(step.requeue_after, outcome.requeue_after)

        new_status = c.keep_terminal(old_status, outcome.status)
        await self._write_status(trainjob, old_status, new_status)
        self._transition_events(trainjob, old_status, new_status)
        if step.error is not None:
            raise step.error
        if c.is_finished(new_status):
            return None
        return step.requeue_after

    # --- plan and apply -------------------------------------------------------------------

    async def _plan(self, trainjob: Obj, step: _Pass, now: datetime) -> Outcome:
        """Render; on failure the status-only outcome, with Failed for permanent failures."""
        try:
            try:
                self._check_leftovers(trainjob, step)
                resolved = await self._resolve_runtime(trainjob, step, now)
                if resolved is None:
                    return self._renderer.derive(trainjob, step.jobset, now)
                runtime, existing = resolved
                return self._renderer.render(trainjob, runtime, existing, now)
            except RenderFailed as err:
                if step.jobset is None:
                    raise _Permanent(CREATION_FAILED, _note(err)) from err
                raise ReconcileError(str(err)) from err
        except _Permanent as failure:
            return self._failed(trainjob, step, failure, now)
        except ReconcileError as err:
            step.error = err
            self._events.record(trainjob, "Warning", CREATION_FAILED, _note(err))
            return self._renderer.derive(trainjob, step.jobset, now)

    def _check_leftovers(self, trainjob: Obj, step: _Pass) -> None:
        """A JobSet or snapshot of an earlier TrainJob with the same name (deleted and created
        again before garbage collection caught up) is neither adopted nor read: wait for it
        to go. Its status must not leak into the new job either."""
        meta = obj_at(trainjob, "metadata")
        uid = meta.get("uid")
        snapshot = self._caches.configmaps.get(
            snapshot_name(str(meta.get("name"))), str(meta.get("namespace") or "")
        )
        for obj in (step.jobset, snapshot):
            owner = _controller_owner(obj)
            if owner is not None and owner.get("kind") == TRAINJOB.kind and owner.get("uid") != uid:
                if obj is step.jobset:
                    step.jobset = None
                name = obj_at(obj, "metadata").get("name")
                raise ReconcileError(
                    f"{(obj or {}).get('kind')} {name} still belongs to an earlier TrainJob "
                    f"{meta.get('name')} (uid {owner.get('uid')}); waiting for its deletion"
                )

    def _failed(self, trainjob: Obj, step: _Pass, failure: _Permanent, now: datetime) -> Outcome:
        outcome = self._renderer.derive(trainjob, step.jobset, now)
        status = copy.deepcopy(outcome.status)
        generation = obj_at(trainjob, "metadata").get("generation")
        c.set_condition(
            status, c.FAILED, "True", failure.reason, failure.message, now,
            observed_generation=generation,
        )  # fmt: skip
        return Outcome(objects=[], status=status)

    async def _apply(self, trainjob: Obj, step: _Pass, outcome: Outcome) -> None:
        """Apply the Plan in a safe order; permanent failures raise ``_Permanent``, transient
        ones are kept in ``step.error`` so that status is still written this pass."""
        pending: list[tuple[Obj, str]] = []
        for obj in outcome.objects:
            if self._may_apply(trainjob, step.jobset, obj):
                fingerprint = _fingerprint(obj)
                if not self._already_live(obj, fingerprint):
                    pending.append((obj, fingerprint))
        pending.sort(key=lambda p: _APPLY_ORDER.get(str(p[0].get("kind")), 2))
        had_jobset = step.jobset is not None
        try:
            for obj, fingerprint in pending:
                with self._writing(obj):
                    applied = await self._apply_one(obj, had_jobset)
                    self._remember_applied(obj, fingerprint, applied)
                    if applied.get("kind") == JOBSET.kind:
                        # This pass's status came from the JobSet's status before the apply:
                        # an answer with another one (written meanwhile) must be reconciled.
                        seen = obj_at(applied, "status") == obj_at(step.jobset, "status")
                        step.jobset = applied
                        self._caches.jobsets.observe(applied, acted_on=seen)
                    elif applied.get("kind") == CONFIGMAP.kind:
                        # Only its metadata and a snapshot's data are read, and both are ours.
                        self._caches.configmaps.observe(applied, acted_on=True)
        except ReconcileError as err:
            step.error = err
            self._events.record(trainjob, "Warning", CREATION_FAILED, _note(err))
            return
        if not had_jobset and step.jobset is not None:
            for warning in outcome.warnings:
                self._events.record(trainjob, "Warning", "TrainJobRenderWarning", warning)

    def _writing(self, obj: Obj) -> contextlib.AbstractContextManager[None]:
        """Holds back the watch events of ``obj`` while our write of it is in flight, so the
        event of our own write, read before its answer, queues no reconcile either."""
        cache = {CONFIGMAP.kind: self._caches.configmaps, JOBSET.kind: self._caches.jobsets,
                 TRAINJOB.kind: self._caches.trainjobs}.get(str(obj.get("kind")))  # fmt: skip
        if cache is None:
            return contextlib.nullcontext()
        meta = obj_at(obj, "metadata")
        return cache.writing(str(meta.get("name")), str(meta.get("namespace") or ""))

    def _already_live(self, obj: Obj, fingerprint: str) -> bool:
        """This exact object was applied by this controller and nobody changed it since (its
        resourceVersion is still the one our apply returned): applying it again would change
        nothing, so the request is saved. Upstream re-applies e.g. the MPI hostfile and TLS
        ConfigMaps on every reconcile, and a suspended JobSet too. Anything else (a new
        desired state, a change by another manager, a controller restart) is applied as usual."""
        kind, namespace, name = _identity(obj)
        cache = {CONFIGMAP.kind: self._caches.configmaps, JOBSET.kind: self._caches.jobsets}
        if kind not in cache:
            return False
        remembered = self._applied.get((kind, namespace, name))
        live = cache[kind].get(name, namespace)
        return (
            remembered is not None and live is not None and remembered == (_rv(live), fingerprint)
        )

    def _remember_applied(self, desired: Obj, fingerprint: str, applied: Obj) -> None:
        self._applied[_identity(desired)] = (_rv(applied), fingerprint)
        if len(self._applied) > _APPLIED_MEMORY:
            del self._applied[next(iter(self._applied))]  # oldest first: dicts keep order

    def _may_apply(self, trainjob: Obj, jobset: Obj | None, obj: Obj) -> bool:
        # A running JobSet is never mutated: only while the TrainJob or the JobSet is suspended
        # (which covers the resume transition) is it applied again. Render already follows this
        # rule; checking here too keeps the invariant even if a plugin gets it wrong.
        if obj.get("kind") != JOBSET.kind or jobset is None:
            return True
        suspended = bool(obj_at(trainjob, "spec").get("suspend"))
        return suspended or bool(obj_at(jobset, "spec").get("suspend"))

    async def _apply_one(self, obj: Obj, had_jobset: bool) -> Obj:
        try:
            kind = kind_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        except KeyError as err:
            raise _Permanent(CREATION_FAILED, str(err)) from err
        try:
            return await self._client.apply(
                kind.plural, obj, field_manager=FIELD_MANAGER, force=True
            )
        except ApiError as err:
            name = obj_at(obj, "metadata").get("name")
            text = f"{obj.get('kind')} {name}: {err}"
            if err.code in (400, 422) and not had_jobset:
                raise _Permanent(CREATION_FAILED, _note(text)) from err
            raise ReconcileError(text) from err
        except TRANSPORT_ERRORS as err:
            raise ReconcileError(f"{obj.get('kind')}: {err}") from err

    async def _resolve_runtime(
        self, trainjob: Obj, step: _Pass, now: datetime
    ) -> tuple[Obj | None, list[Obj]] | None:
        """``(live runtime or None, existing children)`` for render, or None while waiting for
        a runtime that may still appear. Render reads the snapshot from the children first."""
        meta = obj_at(trainjob, "metadata")
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        group, kind_name, ref_name = runtime_ref(trainjob)
        existing = [o for o in (step.jobset,) if o is not None]
        if group != TRAINER_GROUP or kind_name not in (
            TRAINING_RUNTIME_KIND,
            CLUSTER_TRAINING_RUNTIME_KIND,
        ):
            return None, existing  # render writes upstream's TrainingRuntimeNotSupported
        snapshot = self._caches.configmaps.get(snapshot_name(name), namespace)
        runtime: Obj | None = None
        if snapshot is not None:
            existing.append(snapshot)
        else:
            kind = (
                TRAINING_RUNTIME if kind_name == TRAINING_RUNTIME_KIND else CLUSTER_TRAINING_RUNTIME
            )
            runtime = await self._live_runtime(kind, ref_name, namespace)
            if runtime is None:
                self._runtime_missing(trainjob, step, kind_name, ref_name, now)
                return None
        existing += await self._extra_existing(trainjob, runtime or _snapshot_runtime(snapshot))
        return runtime, existing

    def _runtime_missing(
        self, trainjob: Obj, step: _Pass, kind: str, name: str, now: datetime
    ) -> None:
        message = self._renderer.runtime_not_found(kind, name)
        if step.jobset is not None:
            # Already running (e.g. a pre-snapshot job whose runtime was deleted): keep it.
            raise ReconcileError(message)
        created = c.parse_time(obj_at(trainjob, "metadata").get("creationTimestamp")) or now
        waited = (now - created).total_seconds()
        if waited >= self._grace:
            raise _Permanent(RUNTIME_NOT_FOUND, message)
        self._events.record(trainjob, "Warning", CREATION_FAILED, _note(message))
        step.requeue_after = _sooner(step.requeue_after, max(0.1, self._grace - waited))

    async def _live_runtime(self, kind: Kind, name: str, namespace: str) -> Obj | None:
        try:
            return await read_through(self._client, self._caches, kind, name, namespace)
        except ApiError as err:
            raise ReconcileError(f"reading {kind.kind} {name}: {err}") from err
        except TRANSPORT_ERRORS as err:
            raise ReconcileError(f"reading {kind.kind} {name}: {err}") from err

    async def _extra_existing(self, trainjob: Obj, runtime: Obj) -> list[Obj]:
        """Children no informer caches that rendering must see (the plugins name them)."""
        namespace = str(obj_at(trainjob, "metadata").get("namespace") or "")
        wanted = [
            (kind_for(ref.api_version, ref.kind), ref.name)
            for ref in self._renderer.existing_refs(trainjob, runtime)
        ]
        found: list[Obj] = []
        for kind, obj_name in wanted:
            try:
                found.append(
                    await self._client.get(
                        kind.api_version, kind.plural, obj_name, namespace=namespace
                    )
                )
            except ApiError as err:
                if not err.not_found:
                    raise ReconcileError(f"reading {kind.kind} {obj_name}: {err}") from err
            except TRANSPORT_ERRORS as err:
                raise ReconcileError(f"reading {kind.kind} {obj_name}: {err}") from err
        return found

    async def _delete_jobset_or_record(self, trainjob: Obj, step: _Pass) -> None:
        try:
            await self._delete_jobset(step)
        except ReconcileError as err:
            step.error = err  # the Failed condition is still written; the deletion is retried
            self._events.record(trainjob, "Warning", CREATION_FAILED, _note(err))

    async def _delete_jobset(self, step: _Pass) -> None:
        jobset, step.jobset = step.jobset, None
        if jobset is None:
            return
        meta = obj_at(jobset, "metadata")
        try:
            await self._client.delete(
                JOBSET.api_version,
                JOBSET.plural,
                str(meta.get("name")),
                namespace=meta.get("namespace"),
                uid=meta.get("uid"),
            )
        except ApiError as err:
            # Gone already, or replaced by a JobSet with another uid that we must not touch.
            if not (err.not_found or err.conflict):
                raise ReconcileError(f"deleting JobSet {meta.get('name')}: {err}") from err
        except TRANSPORT_ERRORS as err:
            raise ReconcileError(f"deleting JobSet {meta.get('name')}: {err}") from err
        self._caches.jobsets.forget(jobset)

    # --- status ---------------------------------------------------------------------------

    async def _write_status(self, trainjob: Obj, old: Obj, new: Obj) -> None:
        patch: Obj | None = _status_patch(old, new)
        if not patch:
            return
        if not new:
            # The CRD requires a status to have at least one property: an emptied status is
            # removed as a whole instead (e.g. jobsStatus gone with a replaced JobSet).
            patch = None
        meta = obj_at(trainjob, "metadata")
        with self._writing(trainjob):
            try:
                written = await self._client.patch(
                    TRAINJOB.api_version,
                    TRAINJOB.plural,
                    str(meta.get("name")),
                    {"status": patch},
                    namespace=meta.get("namespace"),
                    subresource="status",
                )
            except ApiError as err:
                if err.not_found:
                    return
                raise ReconcileError(f"writing TrainJob status: {err}") from err
            except TRANSPORT_ERRORS as err:
                raise ReconcileError(f"writing TrainJob status: {err}") from err
            # Nothing but our own status change in the answer (no new spec, labels or
            # conditions from anyone else): the watch event of that state has nothing left to
            # reconcile.
            ours = _own_status(obj_at(written, "status")) == _own_status(new)
            acted_on = ours and _inputs(written) == _inputs(trainjob)
            self._caches.trainjobs.observe(written, acted_on=acted_on)

    def _transition_events(self, trainjob: Obj, old: Obj, new: Obj) -> None:
        before, after = c.find(old, c.SUSPENDED), c.find(new, c.SUSPENDED)
        if after is not None and (before or {}).get("status") != after.get("status"):
            self._events.record(
                trainjob, "Normal", str(after.get("reason")), str(after.get("message"))
            )
        if c.is_true(new, c.COMPLETE) and not c.is_true(old, c.COMPLETE):
            done = c.find(new, c.COMPLETE) or {}
            message = str(done.get("message") or "TrainJob completed")
            self._events.record(trainjob, "Normal", "Completed", message)
        if c.is_true(new, c.FAILED) and not c.is_true(old, c.FAILED):
            failed = c.find(new, c.FAILED) or {}
            reason = str(failed.get("reason") or "Failed")
            self._events.record(trainjob, "Warning", reason, str(failed.get("message") or reason))


def _status_patch(old: Obj, new: Obj) -> Obj:
    """A merge patch from ``old`` to ``new`` at the top level of status, without trainerStatus."""
    patch: Obj = {}
    for key, value in new.items():
        if key != "trainerStatus" and old.get(key) != value:
            patch[key] = value
    for key in old:
        if key != "trainerStatus" and key not in new:
            patch[key] = None
    return patch


def _inputs(trainjob: Obj) -> tuple[object, ...]:
    """What a reconcile reads of a TrainJob besides its status."""
    meta = obj_at(trainjob, "metadata")
    return (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("deletionTimestamp"),
        meta.get("labels"),
        meta.get("annotations"),
        trainjob.get("spec"),
    )


def _own_status(status: Obj) -> Obj:
    """A TrainJob status without ``trainerStatus``, which the status server writes."""
    return {k: v for k, v in status.items() if k != "trainerStatus"}


def _controller_owner(obj: Obj | None) -> Obj | None:
    for ref in list_at(obj, "metadata", "ownerReferences"):
        if ref.get("controller"):
            return dict(ref)
    return None


def _deadline_failed(status: Obj) -> bool:
    failed = c.find(status, c.FAILED)
    return (
        failed is not None
        and failed.get("status") == "True"
        and (failed.get("reason") == "DeadlineExceeded")
    )


def _identity(obj: Obj) -> tuple[str, str, str]:
    meta = obj_at(obj, "metadata")
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def _rv(obj: Obj) -> str:
    return str(obj_at(obj, "metadata").get("resourceVersion") or "")


def _fingerprint(obj: Obj) -> str:
    # msgspec with sorted keys: the same digest for equal objects, at a fraction of json's cost.
    text = msgspec.json.encode(obj, order="sorted")
    return hashlib.sha1(text, usedforsecurity=False).hexdigest()


def _sooner(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _snapshot_runtime(snapshot: Obj | None) -> Obj:
    """The runtime inside a snapshot, for deciding which extra children to read; a broken
    snapshot gives {} here and render reports it properly."""
    try:
        runtime = parse_snapshot(str(obj_at(snapshot, "data").get("runtime") or ""))
    except yaml.YAMLError:
        return {}
    return as_dict(runtime)


def _note(err: object) -> str:
    text = str(err)
    if len(text) > _NOTE_LIMIT:
        text = text[:_NOTE_LIMIT] + " ..."
    return f"TrainJob resources reconciliation failed: {text}"
