"""The dashboard's live picture of every TrainJob: list + watch, one row per job, fanned out.

Two watcher threads (TrainJobs, pods) keep a cache through :class:`~kubetrain.client.jobs.
JobClient` (list, then watch from the list's resourceVersion; on any failure, list again). Each
change recomputes the one affected row with the CLI's own functions (``JobClient.view`` and
``present.trainjob_row``) and hands it to every subscriber's asyncio queue. A subscriber first gets
the whole table (a ``snapshot``), then ``row``/``gone`` messages, so nothing falls between a list
and a watch. The threads are daemons: a watch blocks in a read that only the server (or process
exit) ends.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.labels import JOBSET_NAME_LABEL
from kubetrain.client import resources as R
from kubetrain.client.errors import ClientError
from kubetrain.client.jobs import ALL_NAMESPACES, JobClient
from kubetrain.client.present import key_metric, trainjob_headers, trainjob_row
from kubetrain.client.view import JobView

__all__ = ["Hub", "Message", "job_row"]

Key = tuple[str, str]  # (namespace, name)
Message = dict[str, Any]

_HEADERS = trainjob_headers(wide=True, all_namespaces=True)
_RETRY_S = (0.5, 1.0, 2.0, 5.0)
_JOB_PODS = {
    JOBSET_NAME_LABEL: None
}  # pods of some JobSet, i.e. of some TrainJob (None: the label exists)


def job_row(view: JobView, now: datetime | None = None) -> dict[str, Any]:
    """One TrainJob as the list shows it: the cells of ``kubetrain get trainjobs -A -o wide``
    by header, plus the raw numbers a bar and filters need."""
    cells = dict(
        zip(_HEADERS, trainjob_row(view, wide=True, all_namespaces=True, now=now), strict=True)
    )
    percent = view.progress.get("progressPercentage")
    metric = key_metric(view.progress)
    return {
        "key": f"{view.namespace}/{view.name}",
        "cells": cells,
        "percent": percent if isinstance(percent, int) else None,
        "metric": {"name": metric[0], "value": metric[1]} if metric else None,
        "created": view.created,
        "labels": dict((view.obj.get("metadata") or {}).get("labels") or {}),
    }


class Hub:
    """Cache and fan-out of TrainJob rows; start with :meth:`start`, read with :meth:`subscribe`."""

    def __init__(self, jc: JobClient, loop: asyncio.AbstractEventLoop) -> None:
        self.jc = jc
        self.loop = loop
        self.scope = ALL_NAMESPACES  # narrowed to the context's namespace when RBAC says so
        self.error: str | None = None
        self._lock = threading.Lock()
        self._jobs: dict[Key, dict[str, Any]] = {}
        self._pods: dict[Key, dict[str, dict[str, Any]]] = {}
        self._rows: dict[Key, dict[str, Any]] = {}
        self._runtime_nodes: dict[Any, int | None] = {}
        self._subscribers: set[asyncio.Queue[Message]] = set()
        self._listed = threading.Event()
        self._pods_listed = threading.Event()

    # --- subscribers (event loop side) -------------------------------------------------------

    @contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Message]]:
        """A queue that first holds a snapshot (or the error), then every change."""
        queue: asyncio.Queue[Message] = asyncio.Queue()
        queue.put_nowait(self._snapshot())
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def _snapshot(self) -> Message:
        with self._lock:
            rows = list(self._rows.values())
        if self.error is not None:
            return {"type": "error", "message": self.error}
        if not self._listed.is_set():
            return {"type": "loading"}
        return {"type": "snapshot", "rows": rows, "scope": self.scope}

    def _publish(self, message: Message) -> None:
        def deliver() -> None:
            for queue in list(self._subscribers):
                queue.put_nowait(message)

        self.loop.call_soon_threadsafe(deliver)

    def ages(self) -> Message:
        """Every row's AGE cell now (ages move with the clock, not with events)."""
        now = datetime.now(UTC)
        from kubetrain.client.view import age

        with self._lock:
            return {
                "type": "ages",
                "ages": {r["key"]: age(r["created"], now) for r in self._rows.values()},
            }

    def row(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._rows.get((namespace, name))

    # --- watchers (thread side) --------------------------------------------------------------

    def start(self) -> None:
        for target, what in ((self._watch_pods, "pods"), (self._watch_jobs, "trainjobs")):
            threading.Thread(target=target, name=f"dashboard-{what}", daemon=True).start()

    def _list_scope(
        self, info: R.KindInfo, labels: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        try:
            return self.jc.objects_at(info, self.scope, labels)
        except ClientError as exc:
            if exc.code != 403 or self.scope != ALL_NAMESPACES:
                raise
            # Allowed in one namespace only (a cluster's RBAC): show that one.
            self.scope = self.jc.namespace
            return self.jc.objects_at(info, self.scope, labels)

    def _forever(self, body: Any, what: str) -> None:
        failures = 0
        while True:
            try:
                body()
                failures = 0  # a watch that ended normally (server timeout): list again
            except ClientError as exc:
                self.error = f"{what}: {exc}"
                self._publish({"type": "error", "message": self.error})
                time.sleep(_RETRY_S[min(failures, len(_RETRY_S) - 1)])
                failures += 1
            except Exception as exc:  # keep watching whatever broke one round
                self.error = f"{what}: {type(exc).__name__}: {exc}"
                self._publish({"type": "error", "message": self.error})
                time.sleep(_RETRY_S[-1])

    def _watch_pods(self) -> None:
        self._forever(self._pods_round, "pods")

    def _watch_jobs(self) -> None:
        self._pods_listed.wait()
        self._forever(self._jobs_round, "trainjobs")

    def _pods_round(self) -> None:
        pods, version = self._list_scope(R.POD, _JOB_PODS)
        grouped: dict[Key, dict[str, dict[str, Any]]] = {}
        for pod in pods:
            key = _owner(pod)
            if key is not None:
                grouped.setdefault(key, {})[pod["metadata"]["name"]] = pod
        with self._lock:
            self._pods = grouped
        if self._pods_listed.is_set():
            for key in list(grouped):
                self._refresh(key)
        self._pods_listed.set()
        for kind, pod in self.jc.watch(
            R.POD, self.scope, resource_version=version, labels=_JOB_PODS
        ):
            key = _owner(pod)
            if key is None:
                continue
            with self._lock:
                pods_of = self._pods.setdefault(key, {})
                if kind == "DELETED":
                    pods_of.pop(pod["metadata"]["name"], None)
                else:
                    pods_of[pod["metadata"]["name"]] = pod
            self._refresh(key)

    def _jobs_round(self) -> None:
        objs, version = self._list_scope(R.TRAINJOB)
        with self._lock:
            self._jobs = {_key(o): o for o in objs}
            self._rows = {}
        for obj in objs:
            self._refresh(_key(obj), publish=False)
        self._listed.set()
        self.error = None
        self._publish(self._snapshot())
        for kind, obj in self.jc.watch(R.TRAINJOB, self.scope, resource_version=version):
            key = _key(obj)
            if kind == "DELETED":
                with self._lock:
                    self._jobs.pop(key, None)
                    self._rows.pop(key, None)
                self._publish({"type": "gone", "key": "/".join(key)})
                continue
            with self._lock:
                self._jobs[key] = obj
            self._refresh(key)

    def _refresh(self, key: Key, *, publish: bool = True) -> None:
        with self._lock:
            obj = self._jobs.get(key)
            pods = list(self._pods.get(key, {}).values())
        if obj is None:
            return
        # The runtime's node count is looked up (once per runtime) only for jobs that omit it.
        row = job_row(self.jc.view(obj, pods, self._runtime_nodes))
        with self._lock:
            if key not in self._jobs:
                return
            self._rows[key] = row
        if publish:
            self._publish({"type": "row", "row": row})


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


def _owner(pod: dict[str, Any]) -> Key | None:
    meta = pod.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(JOBSET_NAME_LABEL)
    return (str(meta.get("namespace") or ""), str(owner)) if owner else None
