"""The dashboard's live picture of every TrainJob (and Experiment): list + watch, one row per
object, fanned out.

Two watcher threads (TrainJobs, pods) keep a cache through :class:`~kubetrain.client.jobs.
JobClient` (list, then watch from the list's resourceVersion; on any failure, list again). Each
change recomputes the one affected row with the CLI's own functions (``JobClient.view`` and
``present.trainjob_row``) and hands it to every subscriber's asyncio queue. A subscriber first gets
the whole table (a ``snapshot``), then ``row``/``gone`` messages, so nothing falls between a list
and a watch. Experiments (Katib) are a second channel on the same machinery: a third thread, rows
from :mod:`kubetrain.client.tuning`, subscribed with ``subscribe(EXPERIMENTS)``. The threads are
daemons: a watch blocks in a read that only the server (or process exit) ends.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.labels import JOBSET_NAME_LABEL
from kubetrain.client import resources as R
from kubetrain.client.errors import ClientError
from kubetrain.client.jobs import ALL_NAMESPACES, JobClient
from kubetrain.client.present import key_metric, trainjob_headers, trainjob_row
from kubetrain.client.tuning import (
    EXPERIMENT_HEADERS,
    experiment_row,
    experiment_state,
    objective_text,
)
from kubetrain.client.view import JobView

__all__ = ["EXPERIMENTS", "TRAINJOBS", "Hub", "Message", "experiment_summary", "job_row"]

TRAINJOBS = "trainjobs"
EXPERIMENTS = "experiments"

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
        "labels": dict(obj_at(view.obj, "metadata", "labels")),
    }


def experiment_summary(obj: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """One Experiment as the list shows it: the cells of ``kubetrain get experiments`` by header,
    plus its namespace, objective and the reason of its state."""
    meta = obj["metadata"]
    cells = dict(zip(EXPERIMENT_HEADERS, experiment_row(obj, now), strict=True))
    cells["NAMESPACE"] = str(meta.get("namespace") or "")
    cells["OBJECTIVE"] = objective_text(obj)
    _, reason, message = experiment_state(obj)
    return {
        "key": f"{cells['NAMESPACE']}/{meta['name']}",
        "cells": cells,
        "reason": reason,
        "message": message,
        "created": meta.get("creationTimestamp"),
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
        self._subscribers: dict[str, set[asyncio.Queue[Message]]] = {
            TRAINJOBS: set(),
            EXPERIMENTS: set(),
        }
        self._listed = threading.Event()
        self._pods_listed = threading.Event()
        self.experiments_error: str | None = None
        self._experiments: dict[Key, dict[str, Any]] = {}
        self._experiments_listed = threading.Event()

    # --- subscribers (event loop side) -------------------------------------------------------

    @contextmanager
    def subscribe(self, channel: str = TRAINJOBS) -> Iterator[asyncio.Queue[Message]]:
        """A queue that first holds a snapshot (or the error), then every change."""
        queue: asyncio.Queue[Message] = asyncio.Queue()
        queue.put_nowait(self._snapshot(channel))
        self._subscribers[channel].add(queue)
        try:
            yield queue
        finally:
            self._subscribers[channel].discard(queue)

    def error_of(self, channel: str) -> str | None:
        return self.error if channel == TRAINJOBS else self.experiments_error

    def _snapshot(self, channel: str = TRAINJOBS) -> Message:
        if channel == EXPERIMENTS:
            with self._lock:
                rows = list(self._experiments.values())
            if self.experiments_error is not None:
                return {"type": "error", "message": self.experiments_error}
            if not self._experiments_listed.is_set():
                return {"type": "loading"}
            return {"type": "snapshot", "rows": rows, "scope": self.scope}
        with self._lock:
            rows = list(self._rows.values())
        if self.error is not None:
            return {"type": "error", "message": self.error}
        if not self._listed.is_set():
            return {"type": "loading"}
        return {"type": "snapshot", "rows": rows, "scope": self.scope}

    def _publish(self, message: Message, channel: str = TRAINJOBS) -> None:
        def deliver() -> None:
            for queue in list(self._subscribers[channel]):
                queue.put_nowait(message)

        self.loop.call_soon_threadsafe(deliver)

    def ages(self, channel: str = TRAINJOBS) -> Message:
        """Every row's AGE cell now (ages move with the clock, not with events)."""
        now = datetime.now(UTC)
        from kubetrain.client.view import age

        with self._lock:
            rows = self._rows if channel == TRAINJOBS else self._experiments
            return {
                "type": "ages",
                "ages": {r["key"]: age(r["created"], now) for r in rows.values()},
            }

    def row(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._rows.get((namespace, name))

    # --- watchers (thread side) --------------------------------------------------------------

    def start(self) -> None:
        watchers = (
            (self._watch_pods, "pods"),
            (self._watch_jobs, "trainjobs"),
            (self._watch_experiments, "experiments"),
        )
        for target, what in watchers:
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

    def _forever(self, body: Any, what: str, channel: str = TRAINJOBS) -> None:
        failures = 0
        while True:
            try:
                body()
                failures = 0  # a watch that ended normally (server timeout): list again
            except ClientError as exc:
                self._fail(channel, f"{what}: {_explain(exc, channel)}")
                time.sleep(_RETRY_S[min(failures, len(_RETRY_S) - 1)])
                failures += 1
            except Exception as exc:  # keep watching whatever broke one round
                self._fail(channel, f"{what}: {type(exc).__name__}: {exc}")
                time.sleep(_RETRY_S[-1])

    def _fail(self, channel: str, message: str) -> None:
        if channel == TRAINJOBS:
            self.error = message
        else:
            self.experiments_error = message
        self._publish({"type": "error", "message": message}, channel)

    def _watch_pods(self) -> None:
        self._forever(self._pods_round, "pods")

    def _watch_jobs(self) -> None:
        self._pods_listed.wait()
        self._forever(self._jobs_round, "trainjobs")

    def _watch_experiments(self) -> None:
        self._forever(self._experiments_round, "experiments", EXPERIMENTS)

    def _experiments_round(self) -> None:
        objs, version = self._list_scope(R.EXPERIMENT)
        with self._lock:
            self._experiments = {_key(o): experiment_summary(o) for o in objs}
        self._experiments_listed.set()
        self.experiments_error = None
        self._publish(self._snapshot(EXPERIMENTS), EXPERIMENTS)
        for kind, obj in self.jc.watch(R.EXPERIMENT, self.scope, resource_version=version):
            key = _key(obj)
            if kind == "DELETED":
                with self._lock:
                    self._experiments.pop(key, None)
                self._publish({"type": "gone", "key": "/".join(key)}, EXPERIMENTS)
                continue
            row = experiment_summary(obj)
            with self._lock:
                self._experiments[key] = row
            self._publish({"type": "row", "row": row}, EXPERIMENTS)

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


def _explain(exc: ClientError, channel: str) -> str:
    if channel == EXPERIMENTS and exc.code == 404:
        # A cluster without Katib: no kubeflow.org/v1beta1 experiments resource at all.
        return f"this API server does not serve {R.EXPERIMENT.api_version} experiments (is Katib installed?)"
    return str(exc)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


def _owner(pod: dict[str, Any]) -> Key | None:
    meta = obj_at(pod, "metadata")
    owner = obj_at(meta, "labels").get(JOBSET_NAME_LABEL)
    return (str(meta.get("namespace") or ""), str(owner)) if owner else None
