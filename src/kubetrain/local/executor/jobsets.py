"""The JobSet half of the executor: one worker feeds each JobSet and its pods to
`jobset_logic.reconcile` and writes what it decides, in this order: JobSet status first (so a
crash never loses a restart count), then Events, pod deletions, pod creations.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from kubetrain.api.meta import now
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.kinds import JOBSET, POD
from kubetrain.kube.workqueue import RateLimit, WorkQueue, work

from .cache import Cluster, Key, keep_answer, keep_newest, key_of
from .jobset_logic import creation_failed, reconcile
from .kubelet import EventSink, Kubelet
from .objects import random_suffix
from .settings import ExecutorSettings

__all__ = ["JobSetWorker"]

log = logging.getLogger(__name__)

# Answers that a retry would get again: Bad Request, Forbidden (admission), Invalid.
_REFUSED_FOR_GOOD = (400, 403, 422)
# What a status write answers when its JobSet is gone: 404, or 422 when the uid test of
# `_status_patch` failed on a namesake.
_GONE_OR_REPLACED = (404, 422)
# A failed reconcile is tried again soon, and never later than a second after the last try: the
# engine's API server is local, so what failed is usually a moment's restart.
_RETRY = RateLimit(base_delay=0.05, max_delay=1.0)


class JobSetWorker:
    def __init__(
        self,
        api: KubeClient,
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
        self._queue: WorkQueue[Key] = WorkQueue(_RETRY)

    def enqueue(self, key: Key, after: float | None = None) -> None:
        if after:
            self._queue.add_after(key, after)
        else:
            self._queue.add(key)

    def shut_down(self) -> None:
        self._queue.shut_down()

    async def run(self) -> None:
        await work(self._queue, self.reconcile, self._failed)

    @staticmethod
    def _failed(key: Key, err: Exception) -> None:
        log.warning("reconcile %s/%s failed: %s", *key, err)

    async def _still_exists(self, key: Key, uid: str) -> bool:
        """Whether the JobSet of this uid still stands under its name (not gone, not replaced)."""
        try:
            current = await self.api.get(
                JOBSET.api_version, JOBSET.plural, key[1], namespace=key[0]
            )
        except ApiError as err:
            if err.not_found:
                return False
            raise
        return str(current["metadata"].get("uid")) == uid

    def _forget(self, key: Key, uid: str) -> None:
        """Drop a JobSet found gone from the cache, unless a namesake already took its place;
        its DELETED event does the rest."""
        cached = self.cluster.jobsets.get(key)
        if cached is not None and str(cached["metadata"].get("uid")) == uid:
            del self.cluster.jobsets[key]
        self.cluster.lost.pop(uid, None)

    async def reconcile(self, key: Key) -> float | None:
        """Act on one JobSet; the answer is when to look again even if nothing changes."""
        jobset = self.cluster.jobsets.get(key)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return None
        uid = str(jobset["metadata"].get("uid"))
        # Pods and JobSets arrive on separate watches: make sure lost pods were not lost to the
        # JobSet's own deletion before counting them as failures.
        if self.cluster.lost.get(uid) and not await self._still_exists(key, uid):
            self.cluster.lost.pop(uid, None)
            return None
        decision = reconcile(
            jobset,
            self.cluster.pods_of(jobset),
            now=now(),
            suffix=random_suffix,
            settings=self.settings.logic,
        )
        ns, name = key
        if decision.status_changed:
            try:
                updated = await self.api.patch(
                    JOBSET.api_version, JOBSET.plural, name, _status_patch(uid, decision.status),
                    namespace=ns, subresource="status", patch_type="json",
                )  # fmt: skip
            except ApiError as err:
                if err.code not in _GONE_OR_REPLACED or await self._still_exists(key, uid):
                    raise
                # The JobSet decided on was deleted, perhaps created again under its name:
                # nothing of this decision may reach the namesake.
                self._forget(key, uid)
                return None
            keep_answer(self.cluster.jobsets, updated)
        for ev in decision.events:
            await self.event(jobset, ev.type, ev.reason, ev.message, "jobset-controller")
        for deletion in decision.delete:
            pod = self.cluster.pods.get((ns, deletion.name))
            if pod is not None:
                self.cluster.own_deletions.add(str(pod["metadata"].get("uid")))
            with contextlib.suppress(ApiError):
                await self.api.delete(POD.api_version, POD.plural, deletion.name, namespace=ns)
            if pod is not None:
                self.cluster.pods.pop((ns, deletion.name), None)
                self.kubelet.pod_gone(pod)
        for pod in decision.create:
            if not await self._create(jobset, pod):
                break  # the JobSet has failed: the others would be refused alike
        if decision.delete_jobset:
            with contextlib.suppress(ApiError):
                await self.api.delete(
                    JOBSET.api_version, JOBSET.plural, name, namespace=ns,
                    propagation_policy="Foreground",
                )  # fmt: skip
        return None if decision.requeue_after is None else max(0.05, decision.requeue_after)

    async def _create(self, jobset: dict[str, Any], pod: dict[str, Any]) -> bool:
        """Create one pod; False when it was refused for good and the JobSet marked Failed."""
        try:
            created = await self.api.create(POD.api_version, POD.plural, pod)
        except ApiError as err:
            await self.event(
                jobset,
                "Warning",
                "FailedCreate",
                f"Error creating: {err.message}",
                "job-controller",
            )
            if err.code in _REFUSED_FOR_GOOD:
                meta = jobset["metadata"]
                uid = str(meta.get("uid"))
                # The status just written, when there was one: the patch replaces the whole status.
                cached = self.cluster.jobsets.get(key_of(jobset))
                if cached is not None and str(cached["metadata"].get("uid")) == uid:
                    jobset = cached
                name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
                status = creation_failed(
                    jobset, f"pod {name} cannot be created: {err.message}"[:1024], now=now()
                )
                with contextlib.suppress(ApiError):
                    updated = await self.api.patch(
                        JOBSET.api_version, JOBSET.plural, meta["name"], _status_patch(uid, status),
                        namespace=meta["namespace"], subresource="status", patch_type="json",
                    )  # fmt: skip
                    keep_answer(self.cluster.jobsets, updated)
                return False
            return True
        # Its ADDED event (or a later one) may have been read already.
        if keep_newest(self.cluster.pods, created):
            self.kubelet.sync_pod(created)
        return True


def _status_patch(uid: str, status: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch writing the whole status of this JobSet only.

    The ``test`` of the uid makes the API server refuse it (422) when a namesake created after
    this JobSet's deletion stands under the name. A merge patch cannot say this: kube-apiserver's
    status strategy for custom resources copies the stored metadata over the patched object, so
    a ``metadata.uid`` in a status merge patch is ignored there.
    """
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/status", "value": status},
    ]
