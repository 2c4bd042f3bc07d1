"""The LeaderWorkerSet controller of the local engine: applies `logic.plan` through the API.

Level-triggered, one key per LWS: an LWS or one of its pods changes, the LWS is reconciled
from the informers' caches: its headless Services made once per owner (the LWS; with
``UniquePerReplica``, each leader pod), missing pods created, broken groups deleted whole
(their pods come back on a later pass, once all are gone), and the status written through
the status subresource when it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.types import Obj
from kubetrain.controller.events import EventRecorder
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.informer import Informer, object_key
from kubetrain.kube.kinds import LEADER_WORKER_SET, POD, SERVICE
from kubetrain.kube.loop import failure_logger, run_loop
from kubetrain.kube.workqueue import WorkQueue

from .logic import NAME, headless_services, plan

__all__ = ["LwsController"]

log = logging.getLogger(__name__)

Key = tuple[str, str]


def _lws_pod(obj: Obj) -> bool:
    return NAME in obj_at(obj, "metadata", "labels")


class LwsController:
    """Runs LeaderWorkerSets against one API server."""

    def __init__(
        self,
        client: KubeClient,
        *,
        concurrency: int = 2,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.concurrency = concurrency
        self._clock = clock
        self.sets = Informer(client, LEADER_WORKER_SET)
        self.pods = Informer(client, POD, label_selector=NAME, keep=_lws_pod)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.events = EventRecorder(client, component="lws-controller", clock=clock)
        self.ready = asyncio.Event()
        # (owner uid, Service name) of the headless Services made: an LWS's, or a leader pod's.
        self._services: set[tuple[str, str]] = set()
        self.sets.add_handler(lambda _t, obj: self.queue.add(object_key(obj)))
        self.pods.add_handler(self._on_pod)

    def _on_pod(self, _type: str, obj: Obj) -> None:
        namespace, _ = object_key(obj)
        self.queue.add((namespace, str(obj["metadata"]["labels"][NAME])))

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await run_loop(
                [self.sets, self.pods], self.queue, lambda key: self.reconcile(*key),
                failure_logger(log, "leaderworkerset"), stop,
                concurrency=self.concurrency, ready=self.ready, name="lws",
            )  # fmt: skip
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.events.flush(), 5.0)

    async def reconcile(self, namespace: str, name: str) -> None:
        lws = self.sets.get(name, namespace)
        if lws is None or lws["metadata"].get("deletionTimestamp"):
            return
        pods = [
            p for p in self.pods.items()
            if object_key(p)[0] == namespace and p["metadata"]["labels"].get(NAME) == name
        ]  # fmt: skip
        for service in headless_services(lws, pods):
            made = (
                str(service["metadata"]["ownerReferences"][0]["uid"]),
                service["metadata"]["name"],
            )
            if made not in self._services:
                await self._create(SERVICE, service)
                self._services.add(made)
        step = plan(lws, pods, self._clock())
        for group, culprit in step.recreated:
            self.events.record(
                lws, "Normal", "RecreateGroup",
                f"Pod {culprit} restarted or ended; recreating group {group}",
            )  # fmt: skip
        for pod_name in step.delete:
            with contextlib.suppress(ApiError):
                await self.client.delete(POD.api_version, POD.plural, pod_name, namespace=namespace)
        for pod in step.create:
            await self._create(POD, pod)
        if step.status != {k: v for k, v in obj_at(lws, "status").items() if k in step.status}:
            written = await self.client.patch(
                LEADER_WORKER_SET.api_version, LEADER_WORKER_SET.plural, name,
                {"status": step.status}, namespace=namespace, subresource="status",
            )  # fmt: skip
            self.sets.observe(written)

    async def _create(self, kind: Any, obj: Obj) -> None:
        try:
            created = await self.client.create(kind.api_version, kind.plural, obj)
        except ApiError as err:
            if err.conflict:  # already there (a previous pass, or the informer is behind)
                return
            raise
        if kind is POD:
            self.pods.observe(created)
