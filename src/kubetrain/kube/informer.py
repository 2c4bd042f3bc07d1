"""Informers: list, then watch from the list's resourceVersion, into an in-memory cache.

The cache is what reconcilers read, so a reconcile costs no API call for the objects it only
looks at. Watches end for ordinary reasons (server timeout, restart, network); the informer
re-watches from the last resourceVersion it saw, and lists again only when the server says that
version is gone (410) — after a relist, objects missing from the new list are reported as
deleted, so handlers see every disappearance even when the DELETED event itself was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kubetrain.api.access import obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.kinds import Kind

__all__ = ["Backoff", "EventHandler", "Informer", "object_key"]

log = logging.getLogger(__name__)


# Called with ("ADDED" | "MODIFIED" | "DELETED", object); DELETED carries the last known state.
EventHandler = Callable[[str, Obj], None]


def object_key(obj: Obj) -> tuple[str, str]:
    """``(namespace, name)``; the namespace is "" for cluster-scoped objects."""
    meta = obj_at(obj, "metadata")
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


@dataclass(slots=True)
class Backoff:
    """Exponential delay with jitter for reconnecting; reset after a healthy watch."""

    initial: float = 0.2
    maximum: float = 30.0
    attempt: int = 0

    def next(self) -> float:
        delay = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        return float(delay * random.uniform(0.8, 1.2))

    def reset(self) -> None:
        self.attempt = 0


class Informer:
    """One kind (optionally one namespace), cached and watched; handlers run on the event loop."""

    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        keep: Callable[[Obj], bool] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        """``keep``: only objects it accepts are cached and reported (an object that stops
        being accepted is reported as DELETED); e.g. only ConfigMaps a TrainJob controls.
        ``transform``: what the cache keeps of each object (after ``metadata.managedFields`` is
        dropped), for a caller that reads only a few fields of a large kind; it must keep
        ``metadata`` (keys, ``keep`` and resourceVersions read it). ``get``, ``items`` and the
        handlers all see the transformed object."""
        self.kind = kind
        self._transform = transform
        self._keep = keep or (lambda _obj: True)
        # key → resourceVersion of a state the caller has acted on (observe(acted_on=True)).
        self._acted_on: dict[tuple[str, str], str] = {}
        # key → writes of the caller in flight (``writing``), and the events held back meanwhile.
        self._writes: dict[tuple[str, str], int] = {}
        self._held: dict[tuple[str, str], list[tuple[str, Obj]]] = {}
        self._client = client
        self._namespace = namespace if kind.namespaced else None
        self._selector = label_selector
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._store: dict[tuple[str, str], Obj] = {}
        self._handlers: list[EventHandler] = []
        self._rv: str | None = None
        self.synced = asyncio.Event()
        # Counters that tests and metrics read: how often the informer listed and (re)watched.
        self.lists = 0
        self.watches = 0

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list, event or bookmark); where a re-watch resumes."""
        return self._rv

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def get(self, name: str, namespace: str = "") -> Obj | None:
        return self._store.get((namespace if self.kind.namespaced else "", name))

    def observe(self, obj: Obj, *, acted_on: bool = False) -> None:
        """Take an object the controller just wrote, so the next reconcile does not act on the
        older cached copy before the watch delivers it (no handlers run; the watch event will).

        ``acted_on``: the caller already acted on exactly this state (its own write, and the
        answer carries nothing it had not seen), so when the watch brings this resourceVersion
        back the handlers do not run either: that event would only queue a reconcile with
        nothing to do. Any other event for the object runs them as usual.
        """
        if not self._keep(obj):
            return
        key = object_key(obj)
        cached = self._store.get(key)
        rv = _rv_of(obj)
        if cached is None:
            # Absent although the watch is already past this version: its deletion was read
            # before this answer, and the cache must not hold it again.
            if self._rv is None or _later(rv, self._rv):
                self._store[key] = self._shape(obj)
        elif _newer(obj, cached):
            self._store[key] = self._shape(obj)
        if acted_on and rv:
            self._acted_on[key] = rv

    @contextlib.contextmanager
    def writing(self, name: str, namespace: str = "") -> Iterator[None]:
        """Around the caller's own write of one object, before it ``observe``s the answer.

        The server sends the write's answer and its watch event at the same moment, and the
        event is often read first: ``acted_on`` would come too late to spare the handlers an
        event of a state the caller is about to acknowledge. Events of this object that arrive
        meanwhile update the cache at once but reach the handlers only when the block ends, and
        then only those ``observe(acted_on=True)`` did not take (all of them if the write failed).
        """
        key = (namespace if self.kind.namespaced else "", name)
        self._writes[key] = self._writes.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._writes.pop(key) - 1
            if left:
                self._writes[key] = left
            else:
                for event_type, obj in self._held.pop(key, []):
                    rv = _rv_of(obj)
                    if event_type != "DELETED" and rv and self._acted_on.get(key) == rv:
                        del self._acted_on[key]
                        continue
                    self._notify(event_type, obj)

    def forget(self, obj: Obj) -> None:
        """Drop an object the controller just deleted (its DELETED event will follow)."""
        self._store.pop(object_key(obj), None)

    def items(self) -> Iterator[Obj]:
        return iter(list(self._store.values()))

    def __len__(self) -> int:
        return len(self._store)

    async def run(self) -> None:
        """List and watch until cancelled; never returns otherwise."""
        while True:
            try:
                if self._rv is None:
                    await self._relist()
                await self._watch_once()
                self._backoff.reset()
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.gone:
                    log.info(
                        "%s: resourceVersion %s expired, listing again", self.kind.kind, self._rv
                    )
                    self._rv = None
                    continue
                await self._pause(err)
            except TRANSPORT_ERRORS as err:
                await self._pause(err)
            except ValueError as err:  # a garbled watch line: start that watch again
                await self._pause(err)

    async def _pause(self, err: BaseException) -> None:
        delay = self._backoff.next()
        log.warning("%s informer: %s; retrying in %.1fs", self.kind.kind, err, delay)
        await asyncio.sleep(delay)

    async def _relist(self) -> None:
        items, rv = await self._client.list(
            self.kind.api_version,
            self.kind.plural,
            namespace=self._namespace,
            label_selector=self._selector,
        )
        self.lists += 1
        fresh = {object_key(o): self._shape(o) for o in items if self._keep(o)}
        gone = [o for k, o in self._store.items() if k not in fresh]
        old = self._store
        self._store = fresh
        self._acted_on.clear()  # a relist reports by resourceVersion itself
        self._rv = rv or None
        for obj in gone:
            self._notify("DELETED", obj)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._notify("ADDED", obj)
            elif _rv_of(previous) != _rv_of(obj):
                self._notify("MODIFIED", obj)
        self.synced.set()

    async def _watch_once(self) -> None:
        self.watches += 1
        async for event_type, obj in self._client.watch(
            self.kind.api_version,
            self.kind.plural,
            namespace=self._namespace,
            resource_version=self._rv,
            label_selector=self._selector,
            timeout_seconds=self._watch_timeout,
        ):
            rv = _rv_of(obj)
            if event_type == "BOOKMARK":
                self._rv = rv or self._rv
                continue
            if rv:
                self._rv = rv
            key = object_key(obj)
            obj = self._shape(obj)
            acted_on = self._acted_on.get(key)
            if acted_on is not None and (
                event_type == "DELETED" or acted_on == rv or not _later(acted_on, rv)
            ):
                del self._acted_on[key]  # kept only while older events are still coming
            if event_type == "DELETED":
                if self._store.pop(key, None) is not None or self._keep(obj):
                    self._deliver(key, event_type, obj)
            elif event_type in ("ADDED", "MODIFIED"):
                if self._keep(obj):
                    self._store[key] = obj
                    if not rv or acted_on != rv:
                        self._deliver(key, event_type, obj)
                elif self._store.pop(key, None) is not None:
                    self._deliver(key, "DELETED", obj)

    def _deliver(self, key: tuple[str, str], event_type: str, obj: Obj) -> None:
        if key in self._writes:
            self._held.setdefault(key, []).append((event_type, obj))
        else:
            self._notify(event_type, obj)

    def _shape(self, obj: Obj) -> Obj:
        slim = _slim(obj)
        return slim if self._transform is None else self._transform(slim)

    def _notify(self, event_type: str, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, obj)
            except Exception:  # a handler bug must not stop the watch for everyone else
                log.exception("%s handler failed", self.kind.kind)


def _slim(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields``: never read by the controller, and often the
    largest part of an object, so the cache does not hold them."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _rv_of(obj: Obj) -> str:
    return str(obj_at(obj, "metadata").get("resourceVersion") or "")


def _newer(a: Obj, b: Obj) -> bool:
    return _later(_rv_of(a), _rv_of(b))


def _later(ra: str, rb: str) -> bool:
    # resourceVersions are opaque, but every server we talk to uses integers; if not, trust `a`.
    if ra.isdigit() and rb.isdigit():
        return int(ra) > int(rb)
    return True
