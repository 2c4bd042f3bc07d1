"""Wiring: informers → work queue → workers → reconcilers, for one API server.

``Controller`` is what the local daemon runs inside its own event loop and what
``kubetrain controller`` runs in a cluster. Order of start-up: informers list and watch; once
every cache is synced, ``concurrency`` workers take keys from one queue. Keys are
``(kind, namespace, name)``; a key is never in two workers at once, so reconciles of one object
are serialised while different objects proceed in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.labels import TRAINER_API_VERSION
from kubetrain.api.types import Obj
from kubetrain.controller import conditions as c
from kubetrain.controller.events import EventRecorder
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.metrics import ControllerMetrics
from kubetrain.controller.rendering import Renderer
from kubetrain.controller.runtimes import RuntimeFinalizerReconciler
from kubetrain.controller.trainjob import Caches, ReconcileError, TrainJobReconciler
from kubetrain.kube.client import KubeClient, KubeConfigLike, connect
from kubetrain.kube.informer import Informer, object_key
from kubetrain.kube.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    CONFIGMAP,
    JOBSET,
    TRAINING_RUNTIME,
    TRAINJOB,
    Kind,
)
from kubetrain.kube.loop import all_synced
from kubetrain.kube.workqueue import RateLimit, WorkQueue, work
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import runtime_ref
from kubetrain.runtime.defaults import OPERATOR_NAMESPACE
from kubetrain.runtime.render import SNAPSHOT_SUFFIX

__all__ = ["Controller", "Key", "LeadershipLost", "run_controller"]

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (kind, namespace, name); namespace "" for cluster-scoped


class LeadershipLost(Exception):
    """Another replica holds the Lease now; this process must stop (and be restarted)."""


class Controller:
    """The TrainJob controller and the runtime finalizer reconcilers over one client.

    ``namespace``: watch and reconcile TrainJobs of one namespace (None: all; cluster runtimes
    are always watched). ``gates``/``environment``: what render uses (kubetrain's defaults).
    ``concurrency``: workers, i.e. TrainJobs reconciled at once (upstream: 5).
    ``rate_limit``: per-key backoff and overall rate of retries. ``runtime_grace``: seconds a
    TrainJob may wait for a runtime that does not exist yet before it fails.
    ``watch_timeout``: seconds after which the server ends each watch (it is resumed).
    ``leader``: reconcile only while holding this Lease (caches stay warm meanwhile); losing
    it makes ``run`` raise ``LeadershipLost``. ``drain_timeout``: on stop, how long reconciles
    in flight may take to finish. ``clock``: the time conditions and events carry (tests).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        gates: FeatureGates | None = None,
        environment: Environment | None = None,
        concurrency: int = 5,
        renderer: Renderer | None = None,
        rate_limit: RateLimit | None = None,
        runtime_grace: float = 10.0,
        watch_timeout: int = 300,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        leader: LeaderElector | None = None,
        drain_timeout: float = 10.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.client = client
        self.namespace = namespace
        self.concurrency = concurrency
        self.leader = leader
        self.drain_timeout = drain_timeout
        self.metrics = ControllerMetrics()
        self.ready = asyncio.Event()
        """Set once every cache is synced and the workers run."""

        def informer(
            kind: Kind,
            keep: Callable[[Obj], bool] | None = None,
            transform: Callable[[Obj], Obj] | None = None,
        ) -> Informer:
            return Informer(
                client,
                kind,
                namespace=namespace,
                watch_timeout=watch_timeout,
                keep=keep,
                transform=transform,
            )

        # Children are cached only when a TrainJob controls them: a cluster's other JobSets
        # and ConfigMaps are none of the controller's business and would only cost memory.
        self.caches = Caches(
            trainjobs=informer(TRAINJOB),
            jobsets=informer(JOBSET, _trainjob_child, _jobset_as_read),
            configmaps=informer(CONFIGMAP, _trainjob_child_or_snapshot, _configmap_as_read),
            training_runtimes=informer(TRAINING_RUNTIME),
            cluster_training_runtimes=informer(CLUSTER_TRAINING_RUNTIME),
        )
        self.queue: WorkQueue[Key] = WorkQueue(rate_limit)
        self.events = EventRecorder(client, clock=clock)
        self.trainjobs = TrainJobReconciler(
            client,
            self.caches,
            self.events,
            renderer or Renderer(gates or FeatureGates(), environment or Environment()),
            clock=clock,
            runtime_grace=runtime_grace,
        )
        self._runtime_reconcilers = {
            TRAINING_RUNTIME.kind: RuntimeFinalizerReconciler(
                client, self.caches.training_runtimes
            ),
            CLUSTER_TRAINING_RUNTIME.kind: RuntimeFinalizerReconciler(
                client, self.caches.cluster_training_runtimes
            ),
        }
        self._wire_handlers()

    # --- event handlers: object → keys ------------------------------------------------------

    def _wire_handlers(self) -> None:
        caches = self.caches
        caches.trainjobs.add_handler(self._on_trainjob)
        caches.jobsets.add_handler(self._on_owned)
        caches.configmaps.add_handler(self._on_owned)
        caches.training_runtimes.add_handler(self._on_runtime)
        caches.cluster_training_runtimes.add_handler(self._on_runtime)

    def _on_trainjob(self, _type: str, obj: Obj) -> None:
        namespace, name = object_key(obj)
        self.queue.add((TRAINJOB.kind, namespace, name))

    def _on_owned(self, _type: str, obj: Obj) -> None:
        # Children map to the TrainJob that controls them (the controller ownerReference).
        owner = _trainjob_owner(obj)
        if owner is not None:
            namespace = str(obj_at(obj, "metadata").get("namespace") or "")
            self.queue.add((TRAINJOB.kind, namespace, owner))

    def _on_runtime(self, event_type: str, obj: Obj) -> None:
        namespace, name = object_key(obj)
        kind = str(obj.get("kind") or "")
        if event_type != "DELETED":
            self.queue.add((kind, namespace, name))
        if event_type == "ADDED":
            # A TrainJob may have been waiting for this runtime to appear.
            for job in self.caches.trainjobs.items():
                _, ref_kind, ref_name = runtime_ref(job)
                job_ns, job_name = object_key(job)
                if (
                    ref_name == name
                    and ref_kind == kind
                    and (not namespace or namespace == job_ns)
                    and not c.is_finished(job.get("status"))
                    and self.caches.jobsets.get(job_name, job_ns) is None
                ):
                    self.queue.add((TRAINJOB.kind, job_ns, job_name))

    # --- running ----------------------------------------------------------------------------

    async def run(self, stop_event: asyncio.Event | None = None) -> None:
        """Run until ``stop_event`` is set (or the task is cancelled)."""
        stop = stop_event or asyncio.Event()
        informers = [
            self.caches.trainjobs,
            self.caches.jobsets,
            self.caches.configmaps,
            self.caches.training_runtimes,
            self.caches.cluster_training_runtimes,
        ]
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.kind.kind}") for i in informers]
        stopper = asyncio.create_task(stop.wait())
        try:
            if not await all_synced(informers, stop):
                return
            # Caches are warm on every replica; only the leader reconciles.
            if self.leader is not None and not await self.leader.acquire(stop):
                return
            tasks += [
                asyncio.create_task(self._worker(), name=f"worker-{i}")
                for i in range(self.concurrency)
            ]
            self.ready.set()
            log.info("controller running with %d workers", self.concurrency)
            if self.leader is None:
                await stopper
                return
            holding = asyncio.create_task(self.leader.hold(stop), name="leader-lease")
            tasks.append(holding)
            await asyncio.wait({stopper, holding}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.is_set():
                raise LeadershipLost(self.leader.identity)
        finally:
            self.ready.clear()
            self.queue.shut_down()
            stopper.cancel()
            workers = [t for t in tasks if t.get_name().startswith("worker-")]
            if workers and stop.is_set():
                # A requested stop lets reconciles in flight finish (each is short), so no
                # apply is cut off before its status and events are written. Lost leadership
                # does not wait: another replica is already reconciling.
                await asyncio.wait(workers, timeout=self.drain_timeout)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, stopper, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.events.flush(), 5.0)

    async def _worker(self) -> None:
        await work(self.queue, self._reconcile, self._failed)

    async def _reconcile(self, key: Key) -> float | None:
        """One reconcile of ``key``, timed and counted by outcome for ``/metrics``."""
        started = time.monotonic()
        try:
            requeue = await self._dispatch(key)
        except Exception:
            self.metrics.observe(key[0], "error", time.monotonic() - started)
            raise
        outcome = "success" if requeue is None else "requeue_after"
        self.metrics.observe(key[0], outcome, time.monotonic() - started)
        return requeue

    @staticmethod
    def _failed(key: Key, err: Exception) -> None:
        if isinstance(err, ReconcileError):
            log.info("reconcile %s/%s/%s: %s", *key, err)
        else:
            log.error("reconcile %s/%s/%s crashed", *key, exc_info=err)

    async def _dispatch(self, key: Key) -> float | None:
        kind, namespace, name = key
        if kind == TRAINJOB.kind:
            return await self.trainjobs.reconcile(namespace, name)
        reconciler = self._runtime_reconcilers.get(kind)
        return None if reconciler is None else await reconciler.reconcile(namespace, name)


def _trainjob_owner(obj: Obj) -> str | None:
    """The name of the TrainJob that controls ``obj``, if one does."""
    for ref in list_at(obj, "metadata", "ownerReferences"):
        if (
            ref.get("controller")
            and ref.get("kind") == TRAINJOB.kind
            and ref.get("apiVersion") == TRAINER_API_VERSION
        ):
            return str(ref.get("name"))
    return None


def _trainjob_child(obj: Obj) -> bool:
    return _trainjob_owner(obj) is not None


def _trainjob_child_or_snapshot(obj: Obj) -> bool:
    # A snapshot-named ConfigMap nobody controls must still be seen: render refuses it (as
    # upstream does) instead of the controller silently taking it over.
    name = str(obj_at(obj, "metadata").get("name") or "")
    return _trainjob_child(obj) or name.endswith(SNAPSHOT_SUFFIX)


def _jobset_as_read(obj: Obj) -> Obj:
    """What the controller ever reads of a JobSet: metadata (ownership, resourceVersion),
    ``spec.suspend`` (a running JobSet is never applied again) and status (the TrainJob's
    status; the webhook's rule on active jobs). Its pod templates, most of its size, are never
    read back: render builds the desired JobSet afresh each time."""
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata", "status") if k in obj}
    spec = obj_at(obj, "spec")
    if "suspend" in spec:
        kept["spec"] = {"suspend": spec["suspend"]}
    return kept


def _configmap_as_read(obj: Obj) -> Obj:
    """Of a child ConfigMap only metadata is read (ownership, the resourceVersion of the last
    apply); only the runtime snapshot's data is read back, by render. Every job of a runtime
    snapshots the same text, so the cache holds that text once (interned)."""
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    name = str(obj_at(obj, "metadata").get("name") or "")
    if name.endswith(SNAPSHOT_SUFFIX) and "data" in obj:
        data = obj_at(obj, "data")
        kept["data"] = {k: sys.intern(v) if isinstance(v, str) else v for k, v in data.items()}
    return kept


async def run_controller(
    config: KubeConfigLike = None,
    *,
    context: str | None = None,
    namespace: str | None = None,
    gates: FeatureGates | None = None,
    environment: Environment | None = None,
    concurrency: int = 5,
    stop_event: asyncio.Event | None = None,
    ready: Callable[[Controller], None] | None = None,
    lease_identity: str | None = None,
) -> None:
    """Run the controller against the API server of ``config`` until ``stop_event`` is set.

    ``config``: a kubeconfig path, a lightkube ``KubeConfig``/``SingleConfig``, or None for the
    environment (in-cluster service account, ``$KUBECONFIG``, ``~/.kube/config``).
    ``namespace``: watch one namespace (None: all). ``ready`` is called with the ``Controller``
    once it is built (before its caches sync), for callers that want its metrics or events.
    ``lease_identity``: reconcile only while holding the Lease every controller of this API
    uses (``kubeflow-system/trainer.kubeflow.org``) under this identity; a stable identity
    takes the Lease back at once after a restart. Raises ``LeadershipLost`` when it goes.
    """
    client = connect(config, context=context)
    try:
        leader = None
        if lease_identity is not None:
            leader = LeaderElector(client, namespace=OPERATOR_NAMESPACE, identity=lease_identity)
        controller = Controller(
            client,
            namespace=namespace,
            gates=gates,
            environment=environment,
            concurrency=concurrency,
            leader=leader,
        )
        if ready is not None:
            ready(controller)
        await controller.run(stop_event)
    finally:
        await client.close()
