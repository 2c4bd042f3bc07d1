"""Watches: one queue per open watch, fed from the store's committed changes.

A watch without a resourceVersion (or with "0") first replays the current objects as ADDED.
A watch from a resourceVersion replays the kept history after it, or answers one ERROR event
with a 410 Expired Status when that history is gone (as the watch cache does), and clients
relist. Label and field selectors are applied to both the old and the new object, so an object
that stops matching arrives as DELETED and one that starts matching as ADDED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.resources import ResourceDef
from kubetrain.local.apiserver.selectors import FieldSelector, LabelSelector
from kubetrain.local.apiserver.store import Change, Store

__all__ = ["CLOSED", "Watch"]

CLOSED: dict[str, Any] = {"type": "__closed__"}


class Watch:
    """The events of one watch request, ready to write; ``CLOSED`` ends it."""

    def __init__(
        self,
        store: Store,
        res: ResourceDef,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        served: ResourceDef | None = None,
    ) -> None:
        self.store = store
        self.res = res
        # A view (events.k8s.io Events): objects are converted before matching and sending.
        self.convert = convert or (lambda obj: obj)
        self.served = served or res
        self.namespace = namespace if res.namespaced else None
        self.labels = labels
        self.fields = fields
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.last_rv = 0
        self._unsubscribe: Callable[[], None] | None = None

    def _matches(self, obj: dict[str, Any] | None) -> bool:
        return obj is not None and self.labels.matches(obj) and self.fields.matches(obj)

    def start(self, resource_version: str | None, send_initial: bool) -> None:
        """Queue the replay and subscribe, in one step so that nothing falls between them."""
        store = self.store
        if resource_version in (None, "", "0") or send_initial:
            for stored in store.items(self.res.key, self.namespace):
                obj = self.convert(stored)
                if self._matches(obj):
                    self.queue.put_nowait({"type": "ADDED", "object": obj})
            self.last_rv = store.rv
            if send_initial:
                self.queue.put_nowait(self.bookmark(initial_end=True))
        else:
            try:
                since = int(str(resource_version))
            except ValueError as exc:
                raise E.bad_request(f'invalid resource version "{resource_version}"') from exc
            if since < store.history_start:
                self.queue.put_nowait(
                    {"type": "ERROR", "object": E.expired(since, store.history_start + 1).status()}
                )
                self.queue.put_nowait(CLOSED)
                return
            for change in store.history:
                if change.rv > since:
                    self._offer(change)
            self.last_rv = max(since, self.last_rv)
        self._unsubscribe = store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.rv > self.last_rv:
            self._offer(change)
            # Every committed change counts for bookmarks, matching or not.
            self.last_rv = change.rv

    def _offer(self, change: Change) -> None:
        if change.resource != self.res.key:
            return
        if self.namespace is not None and change.namespace != self.namespace:
            return
        obj = self.convert(change.obj)
        old = self.convert(change.old) if change.old is not None else None
        now, before = self._matches(obj), self._matches(old)
        kind = change.type
        if kind == "MODIFIED" and now and not before:
            kind = "ADDED"
        elif kind == "MODIFIED" and before and not now:
            kind = "DELETED"
        elif not now and not (kind == "DELETED" and before):
            return
        self.last_rv = change.rv
        self.queue.put_nowait({"type": kind, "object": obj})

    def bookmark(self, initial_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(max(self.last_rv, 0))}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "type": "BOOKMARK",
            "object": {
                "kind": self.served.kind,
                "apiVersion": self.served.api_version,
                "metadata": meta,
            },
        }

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.queue.put_nowait(CLOSED)
