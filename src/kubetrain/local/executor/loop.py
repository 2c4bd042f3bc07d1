"""The executor's I/O: watch JobSets and Pods, apply the pure decisions, run the pods.

Two halves share one pod cache:

- the JobSet half (one worker, one JobSet at a time) feeds each JobSet and its pods to
  `jobset_logic.reconcile` and writes what it decides: JobSet status first (so a crash never
  loses a restart count), then Events, pod deletions and pod creations;
- the kubelet half starts a `PodRunner` for every pod that has none, adopts the containers a
  previous daemon left behind, stops the processes of deleted pods (grace period capped so a
  delete finishes within seconds) and cleans up their directories.

A pod deleted through the API disappears at once from the embedded API server, while its
processes may still be stopping: such pods are shown to the JobSet logic as terminating, so a
restarted Job never runs beside the remains of its predecessor (a cluster keeps the terminating
Pod object for the same reason).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

from kubetrain.local.sandbox import ContainerProcess, ImageMap, SandboxContext, SandboxMode
from kubetrain.local.sandbox.state import read_states

from .addresses import AddressBook
from .jobset_logic import Settings, format_time, reconcile
from .kubeapi import EVENTS, JOBSETS, PODS, KubeApi, KubeApiError, Resource
from .labels import JOBSET_NAME, RESTART_ATTEMPT
from .objects import make_event, pod_references, random_suffix
from .podrunner import PodRunner, RunnerSettings
from .podstatus import UNKNOWN_MESSAGE, UNKNOWN_REASON
from .spec import read_spec

__all__ = ["Executor", "ExecutorSettings", "TokenProvider"]

log = logging.getLogger(__name__)

# pod, audience → token text for projected serviceAccountToken volumes.
TokenProvider = Callable[[dict[str, Any], str], Awaitable[str]]
Key = tuple[str, str]

# Placeholder for projected service-account tokens until a real issuer is plugged in.
UNSIGNED_TOKEN = "kubetrain-local-unsigned-token"


@dataclass(frozen=True)
class ExecutorSettings:
    home: Path
    node_name: str = "kubetrain"
    logic: Settings = field(default_factory=Settings)
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    # terminationGracePeriodSeconds is capped here so a deleted job's processes are gone
    # within a few seconds, as `kubetrain delete` promises.
    max_grace_s: float = 3.0
    images: ImageMap = field(default_factory=ImageMap)
    sandbox_mode: SandboxMode | None = None
    token_provider: TokenProvider | None = None


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name", ""))


def _now() -> datetime:
    return datetime.now(UTC)


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class Executor:
    """JobSet controller + Job controller + kubelet for one KUBETRAIN_HOME."""

    def __init__(self, api: KubeApi, settings: ExecutorSettings) -> None:
        self.api = api
        self.settings = settings
        self.home = settings.home
        self.addresses = AddressBook(self.home / "executor" / "addresses.json")
        self.jobsets: dict[Key, dict[str, Any]] = {}
        self.pods: dict[Key, dict[str, Any]] = {}
        self.runners: dict[str, PodRunner] = {}  # pod uid → runner
        self.runner_tasks: dict[str, asyncio.Task[None]] = {}
        # Pods deleted from the API whose processes are still stopping: uid → last object.
        self.terminating: dict[str, dict[str, Any]] = {}
        # Pods this executor deleted itself (restart, suspend, finish): their end is no failure.
        self._own_deletions: set[str] = set()
        # Pods deleted by someone else before they ended. The Job controller counts such a pod as
        # failed (job tracking finalizers); with no Job objects the count lives here, per JobSet
        # uid, as a Failed stand-in for the vanished pod. Kept in memory only.
        self.lost: dict[str, list[dict[str, Any]]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self._synced = {PODS: asyncio.Event(), JOBSETS: asyncio.Event()}
        self.ready = asyncio.Event()

    # --- start / stop -------------------------------------------------------------------
    async def start(self) -> None:
        """Begin watching; returns once both caches are filled and leftovers are handled."""
        self._tasks = [
            asyncio.create_task(self._send_events(), name="executor-events"),
            asyncio.create_task(
                self._informer(JOBSETS, None, self._on_jobset), name="executor-jobsets"
            ),
            asyncio.create_task(
                self._informer(PODS, JOBSET_NAME, self._on_pod), name="executor-pods"
            ),
        ]
        await asyncio.gather(self._synced[PODS].wait(), self._synced[JOBSETS].wait())
        await self._reap_orphans()
        for pod in list(self.pods.values()):
            self._sync_pod(pod)
        for key in list(self.jobsets):
            self.enqueue(key)
        self._tasks.append(asyncio.create_task(self._worker(), name="executor-worker"))
        self.ready.set()

    async def stop(self, *, kill_pods: bool = False) -> None:
        """Stop watching. Pods keep running for the next daemon to adopt unless ``kill_pods``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._events.join(), timeout=2)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if kill_pods:
            await asyncio.gather(
                *(r.stop(0) for r in self.runners.values()), return_exceptions=True
            )
        if self._background:
            await asyncio.wait(set(self._background), timeout=10)
        for task in self.runner_tasks.values():
            task.cancel()
        for task in list(self.runner_tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # --- informers ----------------------------------------------------------------------
    async def _informer(
        self, res: Resource, selector: str | None, handler: Callable[[str, dict[str, Any]], None]
    ) -> None:
        cache = self.pods if res == PODS else self.jobsets
        while True:
            try:
                items, rv = await self.api.list(res, label_selector=selector)
                fresh = {_key(o): o for o in items}
                for key, old in list(cache.items()):
                    if key not in fresh:
                        handler("DELETED", old)
                for obj in items:
                    self._handle(handler, "MODIFIED" if _key(obj) in cache else "ADDED", obj)
                self._synced[res].set()
                async for etype, obj in self.api.watch(res, rv, label_selector=selector):
                    if etype == "BOOKMARK":
                        continue
                    self._handle(handler, etype, obj)
            except asyncio.CancelledError:
                raise
            except (KubeApiError, httpx2.HTTPError, OSError, ValueError) as err:
                log.debug("watch %s restarts: %s", res, err)
                await asyncio.sleep(0.5)

    @staticmethod
    def _handle(
        handler: Callable[[str, dict[str, Any]], None], etype: str, obj: dict[str, Any]
    ) -> None:
        # One bad object must not end the watch for every other one.
        try:
            handler(etype, obj)
        except Exception:
            log.exception("handling %s of %s failed", etype, _key(obj))

    def _on_jobset(self, etype: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if etype == "DELETED":
            self.jobsets.pop(key, None)
            self.lost.pop(str(obj["metadata"].get("uid", "")), None)
            self._jobset_gone(obj)
            return
        old = self.jobsets.get(key)
        if old is not None and _rv(old) > _rv(obj):
            return  # our own newer write already sits in the cache
        self.jobsets[key] = obj
        self.enqueue(key)

    def _on_pod(self, etype: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if etype == "DELETED":
            self.pods.pop(key, None)
            self._record_loss(obj)
            self._pod_gone(obj)
        else:
            old = self.pods.get(key)
            if (
                old is not None
                and _rv(old) > _rv(obj)
                and old["metadata"].get("uid") == obj["metadata"].get("uid")
            ):
                return
            self.pods[key] = obj
            if self._synced[PODS].is_set() and self.ready.is_set():
                self._sync_pod(obj)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if JOBSET_NAME in labels:
            self.enqueue((key[0], labels[JOBSET_NAME]))

    # --- the JobSet half ----------------------------------------------------------------------
    def enqueue(self, key: Key, after: float | None = None) -> None:
        if after:
            asyncio.get_running_loop().call_later(after, self.enqueue, key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("reconcile %s/%s failed: %s", *key, err)
                self.enqueue(key, after=1.0)

    def _pods_of(self, jobset: dict[str, Any]) -> list[dict[str, Any]]:
        ns, name = _key(jobset)
        uid = jobset["metadata"].get("uid")
        out = []
        seen = set()
        for pod in self.pods.values():
            meta = pod["metadata"]
            if (
                meta.get("namespace", "default") != ns
                or (meta.get("labels") or {}).get(JOBSET_NAME) != name
            ):
                continue
            owners = [r.get("uid") for r in meta.get("ownerReferences") or []]
            if uid and owners and uid not in owners:
                continue
            seen.add(meta.get("uid"))
            out.append(pod)
        attempt = int((jobset.get("status") or {}).get("restarts") or 0)
        for ghost in self.lost.get(str(uid), []):
            # Only the current restart attempt's Jobs count them; older Jobs are gone.
            if ghost["metadata"]["labels"].get(RESTART_ATTEMPT) == str(attempt):
                out.append(ghost)
        for uid_, pod in self.terminating.items():
            meta = pod["metadata"]
            if (
                uid_ not in seen
                and meta.get("namespace") == ns
                and (meta.get("labels") or {}).get(JOBSET_NAME) == name
            ):
                ghost = copy.deepcopy(pod)
                ghost["metadata"].setdefault("deletionTimestamp", format_time(_now()))
                out.append(ghost)
        return out

    async def _reconcile(self, key: Key) -> None:
        jobset = self.jobsets.get(key)
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return
        if self.lost.get(str(jobset["metadata"].get("uid"))):
            # Pods and JobSets arrive on separate watches: make sure the pods were not lost to
            # the JobSet's own deletion before counting them as failures.
            try:
                await self.api.get(JOBSETS, key[0], key[1])
            except KubeApiError as err:
                if err.code == 404:
                    self.lost.pop(str(jobset["metadata"].get("uid")), None)
                    return
                raise
        decision = reconcile(
            jobset,
            self._pods_of(jobset),
            now=_now(),
            suffix=random_suffix,
            settings=self.settings.logic,
        )
        ns, name = key
        if decision.status_changed:
            updated = await self.api.patch(
                JOBSETS, ns, name, {"status": decision.status}, subresource="status"
            )
            self.jobsets[key] = updated
        for ev in decision.events:
            await self._event(jobset, ev.type, ev.reason, ev.message, component="jobset-controller")
        for deletion in decision.delete:
            pod = self.pods.get((ns, deletion.name))
            if pod is not None:
                self._own_deletions.add(str(pod["metadata"].get("uid")))
            with contextlib.suppress(KubeApiError):
                await self.api.delete(PODS, ns, deletion.name)
            if pod is not None:
                self.pods.pop((ns, deletion.name), None)
                self._pod_gone(pod)
        for pod in decision.create:
            try:
                created = await self.api.create(PODS, pod)
            except KubeApiError as err:
                await self._event(
                    jobset,
                    "Warning",
                    "FailedCreate",
                    f"Error creating: {err.message}",
                    component="job-controller",
                )
                continue
            self.pods[_key(created)] = created
            self._sync_pod(created)
        if decision.delete_jobset:
            with contextlib.suppress(KubeApiError):
                await self.api.delete(JOBSETS, ns, name, propagation="Foreground")
        if decision.requeue_after is not None:
            self.enqueue(key, after=max(0.05, decision.requeue_after))

    async def _event(
        self, involved: dict[str, Any], etype: str, reason: str, message: str, *, component: str
    ) -> None:
        """Queue an Event; one sender writes them in order, off the pods' start path."""
        obj = make_event(
            involved,
            etype,
            reason,
            message,
            now=format_time(_now()),
            component=component,
            host=self.settings.node_name,
        )
        self._events.put_nowait(obj)

    async def _send_events(self) -> None:
        while True:
            obj = await self._events.get()
            try:
                await self.api.create(EVENTS, obj)
            except (KubeApiError, httpx2.HTTPError, OSError) as err:
                log.debug("event not recorded: %s", err)
            finally:
                self._events.task_done()

    def _jobset_gone(self, jobset: dict[str, Any]) -> None:
        spec = read_spec(jobset)
        self.addresses.release(spec.uid)
        # PVCs of volumeClaimPolicies with whenDeleted: Delete (the default) go with the JobSet.
        for policy in (jobset.get("spec") or {}).get("volumeClaimPolicies") or []:
            if ((policy.get("retentionPolicy") or {}).get("whenDeleted") or "Delete") != "Delete":
                continue
            for template in policy.get("templates") or []:
                claim = f"{(template.get('metadata') or {}).get('name', '')}-{spec.name}"
                shutil.rmtree(self.home / "volumes" / spec.namespace / claim, ignore_errors=True)

    # --- the kubelet half ---------------------------------------------------------------------
    def _pod_dir(self, uid: str) -> Path:
        return self.home / "pods" / uid

    def _sync_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        if not uid or uid in self.runners or uid in self.terminating:
            return
        if meta.get("deletionTimestamp"):
            self._pod_gone(pod)
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        has_state = bool(read_states(self._pod_dir(uid)))
        if not has_state and phase == "Running":
            # It ran under a previous daemon and left no trace: record the loss, never re-run.
            self._spawn(uid, self._lost(pod))
            return
        jobset = self.jobsets.get(
            (meta.get("namespace", "default"), (meta.get("labels") or {}).get(JOBSET_NAME, ""))
        )
        if jobset is None:
            return  # its JobSet is gone; garbage collection removes the pod
        spec = read_spec(jobset)
        dns, by_host = self.addresses.hosts(spec)
        hostname = str((pod.get("spec") or {}).get("hostname") or meta.get("name"))
        pod_ip = by_host.get(hostname) or next(iter(by_host.values()), "127.0.0.2")
        runner = PodRunner(
            pod,
            lambda: self._context(pod, pod_ip, dns),
            publish=lambda status: self._publish(pod, status),
            emit=lambda t, r, m: self._event(pod, t, r, m, component="kubelet"),
            clock=lambda: format_time(_now()),
            settings=self.settings.runner,
            pod_ip=pod_ip,
        )
        self.runners[uid] = runner
        self._spawn(uid, self._run(runner, uid, adopt=has_state))

    def _spawn(self, uid: str, coro: Awaitable[None]) -> None:
        async def wrapped() -> None:
            await coro

        self.runner_tasks[uid] = asyncio.create_task(wrapped(), name=f"pod-{uid}")

    async def _run(self, runner: PodRunner, uid: str, *, adopt: bool) -> None:
        try:
            await runner.run(adopt=adopt)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("pod %s: runner failed", runner.name)
            runner.model.fail("ExecutorError", str(err))
            with contextlib.suppress(Exception):
                await runner.publish()
        finally:
            self.runners.pop(uid, None)
            self.runner_tasks.pop(uid, None)

    async def _lost(self, pod: dict[str, Any]) -> None:
        status = copy.deepcopy(pod.get("status") or {})
        now = format_time(_now())
        for cs in status.get("containerStatuses") or []:
            if "terminated" not in (cs.get("state") or {}):
                cs["state"] = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": UNKNOWN_REASON,
                        "message": UNKNOWN_MESSAGE,
                        "finishedAt": now,
                    }
                }
                cs["ready"] = cs["started"] = False
        status.update(phase="Failed", reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE)
        await self._publish(pod, status)
        self.runner_tasks.pop(str(pod["metadata"].get("uid")), None)

    async def _publish(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        ns, name = _key(pod)
        uid = pod["metadata"].get("uid")
        current = self.pods.get((ns, name))
        if current is None or current["metadata"].get("uid") != uid:
            return  # deleted meanwhile: a cluster's kubelet has nothing to report either
        try:
            updated = await self.api.patch(PODS, ns, name, {"status": status}, subresource="status")
        except KubeApiError as err:
            if err.code != 404:
                log.warning("pod %s/%s: status update failed: %s", ns, name, err)
            return
        if self.pods.get((ns, name), {}).get("metadata", {}).get("uid") == uid:
            self.pods[(ns, name)] = updated
        labels = pod["metadata"].get("labels") or {}
        if JOBSET_NAME in labels:
            self.enqueue((ns, labels[JOBSET_NAME]))

    def _record_loss(self, pod: dict[str, Any]) -> None:
        """A pod deleted from outside before it ended counts as a failed pod of its Job."""
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        if uid in self._own_deletions or (pod.get("status") or {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            self._own_deletions.discard(uid)
            return
        labels = meta.get("labels") or {}
        jobset = self.jobsets.get((meta.get("namespace", "default"), labels.get(JOBSET_NAME, "")))
        if jobset is None or jobset["metadata"].get("deletionTimestamp"):
            return  # deleted with its JobSet: nothing left to count against
        now = format_time(_now())
        ghost = copy.deepcopy(pod)
        ghost["metadata"]["deletionTimestamp"] = now
        ghost["status"] = {
            "phase": "Failed",
            "reason": "Deleted",
            "containerStatuses": [
                {
                    "name": str(c.get("name")),
                    "state": {
                        "terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now}
                    },
                }
                for c in (pod.get("spec") or {}).get("containers") or []
            ],
        }
        self.lost.setdefault(str(jobset["metadata"].get("uid")), []).append(ghost)

    def _pod_gone(self, pod: dict[str, Any]) -> None:
        """The Pod object is gone (or going): stop its processes, then remove its files."""
        uid = str(pod["metadata"].get("uid", ""))
        if uid in self.terminating:
            return
        self.terminating[uid] = pod
        task = asyncio.get_running_loop().create_task(self._finish_pod(pod, uid))
        # The loop keeps only weak references to tasks.
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _finish_pod(self, pod: dict[str, Any], uid: str) -> None:
        try:
            runner = self.runners.get(uid)
            if runner is not None:
                await runner.stop(self.settings.max_grace_s)
                task = self.runner_tasks.get(uid)
                if task is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(task, timeout=5)
            else:
                await self._kill_leftovers(self._pod_dir(uid))
            if pod["metadata"].get("deletionTimestamp"):
                ns, name = _key(pod)
                with contextlib.suppress(KubeApiError):
                    await self.api.delete(PODS, ns, name, grace_seconds=0, uid=uid)
            ns = pod["metadata"].get("namespace", "default")
            await asyncio.to_thread(self._remove_files, uid, ns, str(pod["metadata"].get("name")))
        finally:
            self.terminating.pop(uid, None)
            labels = pod["metadata"].get("labels") or {}
            if JOBSET_NAME in labels:
                self.enqueue((pod["metadata"].get("namespace", "default"), labels[JOBSET_NAME]))

    def _remove_files(self, uid: str, namespace: str, name: str) -> None:
        shutil.rmtree(self._pod_dir(uid), ignore_errors=True)
        shutil.rmtree(self.home / "logs" / namespace / name, ignore_errors=True)

    async def _kill_leftovers(self, pod_dir: Path) -> None:
        procs = [ContainerProcess.adopt(s) for s in read_states(pod_dir)]
        await asyncio.gather(
            *(p.terminate(self.settings.max_grace_s) for p in procs if p.is_alive())
        )

    async def _reap_orphans(self) -> None:
        """Processes of pods deleted while no daemon was running: stop them, drop their files."""
        known = {str(p["metadata"].get("uid")) for p in self.pods.values()}
        root = self.home / "pods"
        if not root.is_dir():
            return
        for pod_dir in root.iterdir():
            if pod_dir.name in known or not pod_dir.is_dir():
                continue
            await self._kill_leftovers(pod_dir)
            shutil.rmtree(pod_dir, ignore_errors=True)

    # --- what a pod's sandbox needs ---------------------------------------------------------
    async def _context(
        self, pod: dict[str, Any], pod_ip: str, hosts: dict[str, str]
    ) -> SandboxContext:
        ns = str(pod["metadata"].get("namespace") or "default")
        cm_names, secret_names, audiences = pod_references(pod)
        config_maps: dict[str, dict[str, str]] = {}
        secrets: dict[str, dict[str, bytes]] = {}
        for name in cm_names:
            with contextlib.suppress(KubeApiError):
                cm = await self.api.get(("v1", "configmaps"), ns, name)
                data = dict(cm.get("data") or {})
                for k, v in (cm.get("binaryData") or {}).items():
                    data[k] = base64.b64decode(v).decode(errors="replace")
                config_maps[name] = data
        for name in secret_names:
            with contextlib.suppress(KubeApiError):
                sec = await self.api.get(("v1", "secrets"), ns, name)
                decoded = {k: base64.b64decode(v) for k, v in (sec.get("data") or {}).items()}
                decoded.update(
                    {k: str(v).encode() for k, v in (sec.get("stringData") or {}).items()}
                )
                secrets[name] = decoded
        tokens: dict[str, str] = {}
        for audience in audiences:
            provider = self.settings.token_provider
            tokens[audience] = await provider(pod, audience) if provider else UNSIGNED_TOKEN
        return SandboxContext(
            pod_dir=self._pod_dir(str(pod["metadata"]["uid"])),
            log_dir=self.home / "logs",
            pod_ip=pod_ip,
            hosts=hosts,
            claims_dir=self.home / "volumes",
            config_maps=config_maps,
            secrets=secrets,
            tokens=tokens,
            images=self.settings.images,
            node_name=self.settings.node_name,
            mode=self.settings.sandbox_mode,
        )
