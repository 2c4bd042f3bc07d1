"""The executor: watch JobSets and Pods, apply the pure decisions, run the pods.

`Executor` wires three parts around one `cache.Cluster`: the informers of
:mod:`kubetrain.kube.informer` (JobSets, every Pod, Services) feeding it, the JobSet half
(`jobsets.JobSetWorker`) and the kubelet half (`kubelet.Kubelet`, which also binds pods
created without a node), plus one sender that writes Events in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from kubetrain.api.meta import format_time, now
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.informer import EventHandler, Informer
from kubetrain.kube.kinds import EVENT, JOBSET, NODE, POD, SERVICE, Kind

from .cache import Cluster, jobset_key_of, keep_newest, key_of
from .jobsets import JobSetWorker
from .kubelet import Kubelet
from .node import node_object
from .objects import make_event
from .settings import ExecutorSettings

__all__ = ["Executor"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class Executor:
    """JobSet controller + Job controller + kubelet for one KUBETRAIN_HOME."""

    def __init__(self, api: KubeClient, settings: ExecutorSettings) -> None:
        self.api = api
        self.settings = settings
        self.cluster = Cluster()
        self._events: asyncio.Queue[Obj] = asyncio.Queue()
        self.kubelet = Kubelet(
            api, settings, self.cluster, enqueue=self._enqueue, event=self._event
        )
        self.jobsets = JobSetWorker(api, settings, self.cluster, self.kubelet, self._event)
        self._tasks: list[asyncio.Task[Any]] = []
        self.informers = {
            "jobsets": self._informer(JOBSET, None, self._on_jobset),
            # Every Pod: a JobSet's, or one created directly or by a workload controller.
            "pods": self._informer(POD, None, self._on_pod),
            "services": self._informer(SERVICE, None, self._on_service),
        }
        self.ready = asyncio.Event()

    def _informer(self, kind: Kind, selector: str | None, handler: EventHandler) -> Informer:
        informer = Informer(self.api, kind, label_selector=selector)
        informer.add_handler(handler)
        return informer

    def _enqueue(self, key: tuple[str, str]) -> None:
        self.jobsets.enqueue(key)

    # --- start / stop -------------------------------------------------------------------
    async def start(self) -> None:
        """Begin watching; returns once both caches are filled and leftovers are handled."""
        self._tasks = [asyncio.create_task(self._send_events(), name="executor-events")]
        self._tasks += [
            asyncio.create_task(informer.run(), name=f"executor-{name}")
            for name, informer in self.informers.items()
        ]
        await asyncio.to_thread(self.kubelet.start_network)
        await self._register_node()
        await asyncio.gather(
            self.informers["jobsets"].synced.wait(), self.informers["pods"].synced.wait()
        )
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
            await self.api.create(NODE.api_version, NODE.plural, node)
        except ApiError as err:
            if not err.conflict:
                log.warning("node %s not registered: %s", self.settings.node_name, err)
                return
        # Status goes through its subresource (create drops it), also when the node existed.
        with contextlib.suppress(ApiError):
            await self.api.patch(
                NODE.api_version, NODE.plural, self.settings.node_name,
                {"status": node["status"]}, subresource="status",
            )  # fmt: skip

    async def stop(self, *, kill_pods: bool = False) -> None:
        """Stop watching. Pods keep running for the next daemon to adopt unless ``kill_pods``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._events.join(), timeout=2)
        self.jobsets.shut_down()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.kubelet.stop(kill_pods=kill_pods)

    # --- informer handlers ---------------------------------------------------------------
    def _on_jobset(self, etype: str, obj: Obj) -> None:
        key = key_of(obj)
        if etype == "DELETED":
            self.cluster.jobsets.pop(key, None)
            self.cluster.lost.pop(str(obj["metadata"].get("uid", "")), None)
            self.kubelet.jobset_gone(obj)
            self.kubelet.refresh_names()
            return
        new = key not in self.cluster.jobsets
        if not keep_newest(self.cluster.jobsets, obj):
            return  # our own newer write already sits in the cache
        if new:
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
            if not keep_newest(self.cluster.pods, obj):
                return
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
                await self.api.create(EVENT.api_version, EVENT.plural, obj)
            except ApiError as err:
                log.debug("event not recorded: %s", err)
            except TRANSPORT_ERRORS as err:
                log.debug("event not recorded: %s", err)
            finally:
                self._events.task_done()
