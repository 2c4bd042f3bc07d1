"""The thin part every workload controller shares: informers, a work queue, a writer.

`Workloads` owns one informer per kind (shared by the controllers that read it), the Event
recorder and the clock; each `Controller` owns a queue of ``(namespace, name)`` keys of its
kind and a ``reconcile``. Watched objects are routed to the controllers that care (`routes`):
an object of the controller's own kind, or one its kind controls (by controller reference).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.types import Obj
from kubetrain.controller.events import EventRecorder
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.informer import Informer, object_key
from kubetrain.kube.kinds import Kind
from kubetrain.kube.loop import all_synced, failure_logger
from kubetrain.kube.workqueue import WorkQueue, work

__all__ = ["Controller", "Key", "Workloads"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


class Workloads:
    """The shared state of the workload controllers: client, informers, clock."""

    def __init__(
        self, client: KubeClient, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.client = client
        self.clock = clock
        self.informers: dict[Kind, Informer] = {}
        self.controllers: list[Controller] = []

    def informer(self, kind: Kind) -> Informer:
        if kind not in self.informers:
            informer = Informer(self.client, kind)
            informer.add_handler(lambda etype, obj: self._route(kind, etype, obj))
            self.informers[kind] = informer
        return self.informers[kind]

    def add(self, controller: Controller) -> None:
        self.controllers.append(controller)
        for kind in controller.watches:
            self.informer(kind)

    def _route(self, kind: Kind, etype: str, obj: Obj) -> None:
        for controller in self.controllers:
            if kind in controller.watches:
                for key in controller.keys_for(kind, etype, obj):
                    controller.queue.add(key)

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        informers = list(self.informers.values())
        tasks = [asyncio.create_task(i.run(), name=f"workloads-{i.kind.plural}") for i in informers]
        try:
            if not await all_synced(informers, stop):
                return
            for controller in self.controllers:
                for obj in self.informers[controller.kind].items():
                    controller.queue.add(object_key(obj))
                tasks.append(asyncio.create_task(controller.work(), name=controller.kind.plural))
            if ready is not None:
                ready.set()
            await stop.wait()
        finally:
            for controller in self.controllers:
                controller.queue.shut_down()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.gather(*(c.events.flush() for c in self.controllers)), 5.0
                )


class Controller:
    """One kind's controller. Subclasses set ``kind``, ``watches`` and write ``reconcile``."""

    kind: Kind
    # Kinds whose changes may concern an object of ``kind`` (its own kind first).
    watches: tuple[Kind, ...] = ()
    # The Events' source, as kube-controller-manager's controllers name themselves.
    component: str = "kube-controller-manager"

    def __init__(self, shared: Workloads) -> None:
        self.shared = shared
        self.client = shared.client
        self.queue: WorkQueue[Key] = WorkQueue()
        self.events = EventRecorder(shared.client, component=self.component, clock=shared.clock)

    # --- routing ------------------------------------------------------------------------------
    def keys_for(self, kind: Kind, etype: str, obj: Obj) -> Iterable[Key]:
        """The keys of ``kind`` objects a change of ``obj`` concerns: itself, or its
        controller (by controller reference)."""
        if kind == self.kind:
            return [object_key(obj)]
        ns = str(obj_at(obj, "metadata").get("namespace") or "")
        return [
            (ns, str(ref.get("name")))
            for ref in list_at(obj, "metadata", "ownerReferences")
            if as_dict(ref).get("controller") and ref.get("kind") == self.kind.kind
        ]

    # --- reading ------------------------------------------------------------------------------
    def cached(self, kind: Kind, namespace: str) -> list[Obj]:
        return [
            o
            for o in self.shared.informers[kind].items()
            if obj_at(o, "metadata").get("namespace") == namespace
        ]

    def get(self, key: Key) -> Obj | None:
        obj = self.shared.informers[self.kind].get(key[1], key[0])
        if obj is None:
            return None
        # List items may leave out their kind; owner references need it.
        return {"apiVersion": self.kind.api_version, "kind": self.kind.kind, **obj}

    # --- writing ------------------------------------------------------------------------------
    async def create(self, kind: Kind, obj: Obj) -> Obj:
        created = await self.client.create(kind.api_version, kind.plural, obj)
        self.shared.informers[kind].observe(created)
        return created

    async def delete(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        try:
            await self.client.delete(
                kind.api_version, kind.plural, meta["name"], namespace=meta.get("namespace"),
                uid=meta.get("uid"),
            )  # fmt: skip
        except ApiError as err:
            if not err.not_found and err.code != 409:
                raise
        # Not counted again before the watch says it is going (a pod stays while it stops).
        self.shared.informers[kind].forget(obj)

    async def patch(
        self, kind: Kind, obj: Obj, body: Obj, *, subresource: str | None = None
    ) -> Obj:
        meta = obj["metadata"]
        updated = await self.client.patch(
            kind.api_version, kind.plural, meta["name"], body, namespace=meta.get("namespace"),
            subresource=subresource,
        )  # fmt: skip
        self.shared.informers[kind].observe(updated)
        return updated

    async def write_status(self, obj: Obj, status: Obj) -> None:
        """Store ``status`` unless it is what the object already says; a merge patch that
        names every old key, so fields that went away are removed."""
        old = obj_at(obj, "status")
        if old == status:
            return
        body = {k: status.get(k) for k in {*old, *status}}
        await self.patch(self.kind, obj, {"status": body}, subresource="status")

    def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.record(obj, "Warning" if type_ == "Warning" else "Normal", reason, message)

    # --- the worker ----------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> float | None:
        """Bring the object of ``key`` and what it controls one step on; seconds until it
        should be looked at again (None: when something changes)."""
        raise NotImplementedError

    async def work(self) -> None:
        await work(self.queue, self.reconcile, failure_logger(log, self.kind.kind))
