"""The executor: watch JobSets and Pods, apply the pure decisions, run the pods.

`Executor` wires three parts around one `cache.Cluster`: informers (list + watch of JobSets,
of every Pod and of Services), the JobSet half (`jobsets.JobSetWorker`) and the kubelet half
(`kubelet.Kubelet`, which also binds pods created without a node), plus one sender that writes
Events in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import httpx2

from .cache import Cluster, jobset_key_of, key_of, now, rv_of
from .decision import format_time
from .jobsets import JobSetWorker
from .kubeapi import EVENTS, JOBSETS, PODS, SERVICES, KubeApi, KubeApiError, Resource
from .kubelet import Kubelet
from .node import node_object
from .objects import make_event
from .settings import ExecutorSettings

__all__ = ["Executor"]

NODES: Resource = ("v1", "nodes")

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[str, Obj], None]


class Executor:
    """JobSet controller + Job controller + kubelet for one KUBETRAIN_HOME."""

    def __init__(self, api: KubeApi, settings: ExecutorSettings) -> None:
        self.api = api
        self.settings = settings
        self.cluster = Cluster()
        self._events: asyncio.Queue[Obj] = asyncio.Queue()
        self.kubelet = Kubelet(
            api, settings, self.cluster, enqueue=self._enqueue, event=self._event
        )
        self.jobsets = JobSetWorker(api, settings, self.cluster, self.kubelet, self._event)
        self._tasks: list[asyncio.Task[Any]] = []
        self._synced = {PODS: asyncio.Event(), JOBSETS: asyncio.Event()}
        self.ready = asyncio.Event()

    def _enqueue(self, key: tuple[str, str]) -> None:
        self.jobsets.enqueue(key)

    # --- start / stop -------------------------------------------------------------------
    async def start(self) -> None:
        """Begin watching; returns once both caches are filled and leftovers are handled."""
        self._tasks = [
            asyncio.create_task(self._send_events(), name="executor-events"),
            asyncio.create_task(
                self._informer(JOBSETS, None, self._on_jobset), name="executor-jobsets"
            ),
            # Every Pod: a JobSet's, or one created directly or by a workload controller.
            asyncio.create_task(self._informer(PODS, None, self._on_pod), name="executor-pods"),
            asyncio.create_task(
                self._informer(SERVICES, None, self._on_service), name="executor-services"
            ),
        ]
        await asyncio.to_thread(self.kubelet.start_network)
        await self._register_node()
        await asyncio.gather(self._synced[PODS].wait(), self._synced[JOBSETS].wait())
        # What a previous daemon left: processes of pods gone from the API end; the rest is
        # adopted, or recorded as lost, by sync_pod.
        await self.kubelet.reap_orphans()
        for pod in list(self.cluster.pods.values()):
            self.kubelet.sync_pod(pod)
        for key in list(self.cluster.jobsets):
            self.jobsets.enqueue(key)
        self._tasks.append(asyncio.create_task(self.jobsets.run(), name="executor-worker"))
        self.ready.set()

    async def _register_node(self) -> None:
        """The Node object, as a kubelet registers its node (kubectl get/describe nodes)."""
        node = node_object(self.settings.node_name, self.kubelet.allocatable)
        try:
            await self.api.create(NODES, node)
        except KubeApiError as err:
            if err.code != 409:
                log.warning("node %s not registered: %s", self.settings.node_name, err)
                return
        # Status goes through its subresource (create drops it), also when the node existed.
        with contextlib.suppress(KubeApiError):
            await self.api.patch(
                NODES, None, self.settings.node_name, {"status": node["status"]},
                subresource="status",
            )  # fmt: skip

    async def stop(self, *, kill_pods: bool = False) -> None:
        """Stop watching. Pods keep running for the next daemon to adopt unless ``kill_pods``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._events.join(), timeout=2)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.kubelet.stop(kill_pods=kill_pods)

    # --- informers ----------------------------------------------------------------------
    async def _informer(self, res: Resource, selector: str | None, handler: Handler) -> None:
        cache = {PODS: self.cluster.pods, JOBSETS: self.cluster.jobsets}.get(
            res, self.cluster.services
        )
        while True:
            try:
                items, rv = await self.api.list(res, label_selector=selector)
                fresh = {key_of(o) for o in items}
                for key, old in list(cache.items()):
                    if key not in fresh:
                        self._handle(handler, "DELETED", old)
                for obj in items:
                    self._handle(handler, "MODIFIED" if key_of(obj) in cache else "ADDED", obj)
                if res in self._synced:
                    self._synced[res].set()
                async for etype, obj in self.api.watch(res, rv, label_selector=selector):
                    if etype != "BOOKMARK":
                        self._handle(handler, etype, obj)
            except asyncio.CancelledError:
                raise
            except (KubeApiError, httpx2.HTTPError, OSError, ValueError) as err:
                log.debug("watch %s restarts: %s", res, err)
                await asyncio.sleep(0.5)

    @staticmethod
    def _handle(handler: Handler, etype: str, obj: Obj) -> None:
        # One bad object must not end the watch for every other one.
        try:
            handler(etype, obj)
        except Exception:
            log.exception("handling %s of %s failed", etype, key_of(obj))

    def _on_jobset(self, etype: str, obj: Obj) -> None:
        key = key_of(obj)
        if etype == "DELETED":
            self.cluster.jobsets.pop(key, None)
            self.cluster.lost.pop(str(obj["metadata"].get("uid", "")), None)
            self.kubelet.jobset_gone(obj)
            self.kubelet.refresh_names()
            return
        old = self.cluster.jobsets.get(key)
        if old is not None and rv_of(old) > rv_of(obj):
            return  # our own newer write already sits in the cache
        self.cluster.jobsets[key] = obj
        if old is None:
            self.kubelet.refresh_names()
        self.jobsets.enqueue(key)

    def _on_service(self, etype: str, obj: Obj) -> None:
        if etype == "DELETED":
            self.cluster.services.pop(key_of(obj), None)
        else:
            self.cluster.services[key_of(obj)] = obj
        self.kubelet.refresh_names()

    def _on_pod(self, etype: str, obj: Obj) -> None:
        key = key_of(obj)
        if etype == "DELETED":
            self.cluster.pods.pop(key, None)
            self.cluster.record_loss(obj)
            self.kubelet.pod_gone(obj)
        else:
            old = self.cluster.pods.get(key)
            same = old is not None and old["metadata"].get("uid") == obj["metadata"].get("uid")
            if same and old is not None and rv_of(old) > rv_of(obj):
                return
            self.cluster.pods[key] = obj
            if self.ready.is_set():
                self.kubelet.sync_pod(obj)
        if self.cluster.services:
            self.kubelet.refresh_names()  # a pod that became ready is an endpoint now
        jobset = jobset_key_of(obj)
        if jobset is not None:
            self.jobsets.enqueue(jobset)

    # --- events ---------------------------------------------------------------------------------
    async def _event(
        self, involved: Obj, etype: str, reason: str, message: str, component: str
    ) -> None:
        """Queue an Event; one sender writes them in order, off the pods' start path."""
        self._events.put_nowait(
            make_event(
                involved,
                etype,
                reason,
                message,
                now=format_time(now()),
                component=component,
                host=self.settings.node_name,
            )
        )

    async def _send_events(self) -> None:
        while True:
            obj = await self._events.get()
            try:
                await self.api.create(EVENTS, obj)
            except (KubeApiError, httpx2.HTTPError, OSError) as err:
                log.debug("event not recorded: %s", err)
            finally:
                self._events.task_done()
