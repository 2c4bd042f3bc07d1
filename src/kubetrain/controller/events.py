"""Kubernetes Events about the objects the controller manages.

Written as core/v1 Events with ``firstTimestamp``, ``lastTimestamp`` and ``count`` (the shape
client-go's classic recorder writes), because the official SDK drops every event without
``firstTimestamp`` and ``kubectl describe`` reads these fields. Upstream writes through the
events.k8s.io recorder instead, whose events the SDK therefore never shows (kubeflow/sdk 0.5.0 kubeflow/trainer/backends/kubernetes/backend.py).

A repeat of the same (object, type, reason, message) bumps ``count`` and ``lastTimestamp`` of the
event already written instead of creating another one. Recording never raises into a reconcile:
an event is best-effort, the status is the record that matters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from kubetrain.api.access import obj_at
from kubetrain.api.meta import format_time
from kubetrain.api.types import Obj
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.kinds import EVENT

__all__ = ["COMPONENT", "EventRecorder", "EventType", "format_time"]

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

COMPONENT = "trainer-trainjob-controller"
_MAX_REMEMBERED = 4096  # events whose repeats are counted; older ones just start anew
_MAX_MESSAGE = 1024  # the API server rejects longer event notes; keep a margin for "..."


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        *,
        component: str = COMPONENT,
        instance: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._component = component
        self._instance = instance or f"{component}-{socket.gethostname()}-{os.getpid()}"
        self._clock = clock
        # (uid, type, reason, message) -> (namespace, event name, count)
        self._seen: dict[tuple[str, str, str, str], tuple[str, str, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # One lock per event key, while someone holds or awaits it: (lock, users).
        self._locks: dict[tuple[str, str, str, str], tuple[asyncio.Lock, int]] = {}

    def record(
        self,
        obj: Obj,
        type_: EventType,
        reason: str,
        message: str,
        *,
        action: str = "Reconciling",
    ) -> None:
        """Emit in the background; returns at once."""
        task = asyncio.get_running_loop().create_task(
            self._emit(obj, type_, reason, message, action)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Wait for every event recorded so far to be written (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _emit(
        self, obj: Obj, type_: EventType, reason: str, message: str, action: str
    ) -> None:
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        uid = str(obj_at(obj, "metadata").get("uid") or "")
        key = (uid, type_, reason, message)
        now = format_time(self._clock())
        # Repeats of one event must be counted in order; different events are written at once
        # (behind one lock for all, a burst of new jobs waited for every other job's events).
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                await self._write(obj, key, type_, reason, message, action, now)
        finally:
            lock, users = self._locks[key]
            if users > 1:
                self._locks[key] = (lock, users - 1)
            else:
                del self._locks[key]

    async def _write(
        self,
        obj: Obj,
        key: tuple[str, str, str, str],
        type_: EventType,
        reason: str,
        message: str,
        action: str,
        now: str,
    ) -> None:
        meta = obj_at(obj, "metadata")
        namespace = str(meta.get("namespace") or "default")
        try:
            seen = self._seen.get(key)
            if seen is not None:
                ns, name, count = seen
                try:
                    await self._client.patch(
                        EVENT.api_version,
                        EVENT.plural,
                        name,
                        {"count": count + 1, "lastTimestamp": now},
                        namespace=ns,
                    )
                    self._seen[key] = (ns, name, count + 1)
                    return
                except ApiError as err:
                    if not err.not_found:
                        raise
            name = f"{meta.get('name', 'object')}.{secrets.token_hex(8)}"
            await self._client.create(
                EVENT.api_version,
                EVENT.plural,
                self._event(obj, name, namespace, type_, reason, message, action, now),
            )
            self._seen[key] = (namespace, name, 1)
            if len(self._seen) > _MAX_REMEMBERED:
                del self._seen[next(iter(self._seen))]  # oldest first: dicts keep order
        except Exception as err:  # best-effort by design (module docstring)
            log.warning("could not record event %s for %s: %s", reason, meta.get("name"), err)

    def _event(
        self,
        obj: Obj,
        name: str,
        namespace: str,
        type_: str,
        reason: str,
        message: str,
        action: str,
        now: str,
    ) -> Obj:
        meta = obj_at(obj, "metadata")
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "type": type_,
            "reason": reason,
            "message": message,
            "action": action,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }
