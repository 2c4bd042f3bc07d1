"""The JobSet half of the executor: one worker feeds each JobSet and its pods to
`jobset_logic.reconcile` and writes what it decides, in this order: JobSet status first (so a
crash never loses a restart count), then Events, pod deletions, pod creations.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .cache import Cluster, Key, key_of, now
from .jobset_logic import creation_failed, reconcile
from .kubeapi import JOBSETS, PODS, KubeApi, KubeApiError
from .kubelet import EventSink, Kubelet
from .objects import random_suffix
from .settings import ExecutorSettings

__all__ = ["JobSetWorker"]

log = logging.getLogger(__name__)

# Answers that a retry would get again: Bad Request, Forbidden (admission), Invalid.
_REFUSED_FOR_GOOD = (400, 403, 422)


class JobSetWorker:
    def __init__(
        self,
        api: KubeApi,
        settings: ExecutorSettings,
        cluster: Cluster,
        kubelet: Kubelet,
        event: EventSink,
    ) -> None:
        self.api = api
        self.settings = settings
        self.cluster = cluster
        self.kubelet = kubelet
        self.event = event
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()

    def enqueue(self, key: Key, after: float | None = None) -> None:
        if after:
            asyncio.get_running_loop().call_later(after, self.enqueue, key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def run(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("reconcile %s/%s failed: %s", *key, err)
                self.enqueue(key, after=1.0)

    async def _still_exists(self, key: Key) -> bool:
        try:
            await self.api.get(JOBSETS, key[0], key[1])
        except KubeApiError as err:
            if err.code == 404:
                return False
            raise
        return True

    async def reconcile(self, key: Key) -> None:
        jobset = self.cluster.jobsets.get(key)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return
        uid = str(jobset["metadata"].get("uid"))
        # Pods and JobSets arrive on separate watches: make sure lost pods were not lost to the
        # JobSet's own deletion before counting them as failures.
        if self.cluster.lost.get(uid) and not await self._still_exists(key):
            self.cluster.lost.pop(uid, None)
            return
        decision = reconcile(
            jobset,
            self.cluster.pods_of(jobset),
            now=now(),
            suffix=random_suffix,
            settings=self.settings.logic,
        )
        ns, name = key
        if decision.status_changed:
            updated = await self.api.patch(
                JOBSETS, ns, name, {"status": decision.status}, subresource="status"
            )
            self.cluster.jobsets[key] = updated
        for ev in decision.events:
            await self.event(jobset, ev.type, ev.reason, ev.message, "jobset-controller")
        for deletion in decision.delete:
            pod = self.cluster.pods.get((ns, deletion.name))
            if pod is not None:
                self.cluster.own_deletions.add(str(pod["metadata"].get("uid")))
            with contextlib.suppress(KubeApiError):
                await self.api.delete(PODS, ns, deletion.name)
            if pod is not None:
                self.cluster.pods.pop((ns, deletion.name), None)
                self.kubelet.pod_gone(pod)
        for pod in decision.create:
            if not await self._create(jobset, pod):
                break  # the JobSet has failed: the others would be refused alike
        if decision.delete_jobset:
            with contextlib.suppress(KubeApiError):
                await self.api.delete(JOBSETS, ns, name, propagation="Foreground")
        if decision.requeue_after is not None:
            self.enqueue(key, after=max(0.05, decision.requeue_after))

    async def _create(self, jobset: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Create one pod; False when it was refused for good and the JobSet marked Failed."""
        try:
            created = await self.api.create(PODS, pod)
        except KubeApiError as err:
            await self.event(
                jobset,
                "Warning",
                "FailedCreate",
                f"Error creating: {err.message}",
                "job-controller",
            )
            if err.code in _REFUSED_FOR_GOOD:
                meta = jobset["metadata"]
                name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
                status = creation_failed(
                    jobset, f"pod {name} cannot be created: {err.message}"[:1024], now=now()
                )
                with contextlib.suppress(KubeApiError):
                    updated = await self.api.patch(
                        JOBSETS, meta["namespace"], meta["name"], {"status": status},
                        subresource="status",
                    )  # fmt: skip
                    self.cluster.jobsets[key_of(updated)] = updated
                return False
            return True
        self.cluster.pods[key_of(created)] = created
        self.kubelet.sync_pod(created)
        return True
