"""The kubelet half of the executor: one `PodRunner` per pod of this node.

It starts a runner for every pod that has none, adopts the containers a previous daemon left
behind (their state files say which), records as failed a pod that was running under a previous
daemon and left no trace (never re-running it), stops the processes of deleted pods with a
capped grace period, and removes their files. Status goes to ``pods/status``; Events through the
executor's sender.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import logging
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.api.meta import format_time, now
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.kinds import CONFIGMAP, POD, SECRET
from kubetrain.local.sandbox import (
    HOST_LOOPBACK,
    ContainerProcess,
    NetworkUnavailable,
    PodNetwork,
    SandboxContext,
    SandboxError,
    bridge_address,
    cgroup_probe,
    pod_dns_names,
    sandbox_mode,
    service_dns_names,
)
from kubetrain.local.sandbox.state import read_states

from .addresses import AddressBook
from .apiaccess import ROOT_CA, with_api_access
from .cache import Cluster, Key, jobset_key_of, keep_answer, key_of
from .endpoints import service_endpoints
from .labels import JOBSET_UID
from .node import machine_allocatable
from .objects import pod_references
from .podrunner import PodRunner
from .podstatus import UNKNOWN_MESSAGE, UNKNOWN_REASON
from .ports import PortGate, declared_ports
from .scheduling import (
    Resources,
    assign_gpus,
    insufficient,
    pod_requests,
    unschedulable_message,
)
from .settings import REFUSED_REASON, UNSIGNED_TOKEN, ExecutorSettings
from .spec import read_spec

__all__ = ["HOST_NAME", "EventSink", "Kubelet"]

log = logging.getLogger(__name__)

# A pod's PodScheduled message while it has scheduling gates, as kube-scheduler words it.
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"

# What a pod on the pod network calls the host (its loopback, through the egress path).
HOST_NAME = "host.kubetrain.internal"

Obj = dict[str, Any]
# (involved object, type, reason, message, component)
EventSink = Callable[[Obj, str, str, str, str], Awaitable[None]]


class Kubelet:
    def __init__(
        self,
        api: KubeClient,
        settings: ExecutorSettings,
        cluster: Cluster,
        *,
        enqueue: Callable[[Key], None],
        event: EventSink,
    ) -> None:
        self.api = api
        self.settings = settings
        self.home = settings.home
        self.cluster = cluster
        self.enqueue = enqueue
        self.event = event
        self.addresses = AddressBook(self.home / "executor" / "addresses.json")
        self.runners: dict[str, PodRunner] = {}  # pod uid → runner
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.ports = PortGate()
        # Pods waiting for a declared port: uid → why (the message last published).
        self.waiting: dict[str, str] = {}
        self._retry: asyncio.TimerHandle | None = None
        # The pod network (None: pods share the host's) and what `kubetrain doctor` says of it.
        self.network: PodNetwork | None = None
        self.network_note = "not started"
        self.ips: dict[str, str] = {}  # pod uid → its address while its namespace exists
        # This home's subtree of the machine's cgroups: two engines never share one.
        digest = hashlib.sha1(str(self.home.resolve()).encode(), usedforsecurity=False)
        self._cgroup_key = f"home-{digest.hexdigest()[:12]}"
        self._names_key: object = None
        self._names_timer: asyncio.TimerHandle | None = None
        # The node: what it has, what running pods requested, which GPUs each holds.
        self.allocatable = settings.allocatable or machine_allocatable()
        self.requests: dict[str, Resources] = {}
        # Pods whose binding to this node is on its way to the API server (uids).
        self.binding: set[str] = set()
        self.gpus: dict[str, tuple[int, ...]] = {}

    # --- the pod network ---------------------------------------------------------------------
    def start_network(self) -> None:
        """Open the pod network (blocking), or note why pods share the host's network."""
        mode = self.settings.sandbox_mode or sandbox_mode().mode
        if not self.settings.pod_network:
            self.network_note = "host network: the pod network is off in the engine's settings"
            return
        if mode != "bwrap":
            self.network_note = "host network: pods run as plain processes (no bwrap sandbox)"
            return
        try:
            self.network = PodNetwork.open(self.home / "executor" / "network")
        except NetworkUnavailable as err:
            self.network_note = f"host network: {err}"
            log.warning("no pod network, pods share the host's ports: %s", err)
            return
        self.network_note = "pod network"
        # Bridge addresses belong to this home alone: no offset, a book of their own.
        self.addresses = AddressBook(
            self.home / "executor" / "pod-addresses.json", base=0, address=bridge_address
        )

    def names(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """What every pod resolves on the pod network: all pods of every JobSet, each
        JobSet's headless Service, every Service with a selector (its ready endpoints), and
        the control plane and the host (the host's loopback, via egress)."""
        hosts = {
            n: HOST_LOOPBACK if ip.startswith("127.") else ip
            for n, ip in self.settings.extra_hosts.items()
        }
        # The control plane and the host itself (as rootless engines name it:
        # host.containers.internal), through the egress path.
        hosts.update(self.host_names())
        services: dict[str, list[str]] = {}
        for jobset in self.cluster.jobsets.values():
            spec = read_spec(jobset)
            dns, by_host = self.addresses.hosts(spec)
            hosts.update(dns)
            if spec.dns_hostnames:
                # JobSet's Service publishes not-ready addresses: every pod is an endpoint.
                for name in service_dns_names(spec.subdomain, spec.namespace):
                    services[name] = list(by_host.values())
        for pod in self.cluster.pods.values():
            # A pod of no JobSet with a hostname and subdomain (a StatefulSet's) is named
            # under its headless Service, as cluster DNS names it.
            pod_spec, ip = obj_at(pod, "spec"), obj_at(pod, "status").get("podIP")
            if ip and pod_spec.get("subdomain") and jobset_key_of(pod) is None:
                host = str(pod_spec.get("hostname") or pod["metadata"].get("name"))
                hosts.update(
                    dict.fromkeys(pod_dns_names(host, pod_spec["subdomain"], key_of(pod)[0]), ip)
                )
        for service in self.cluster.services.values():
            ns, name = key_of(service)
            endpoints = service_endpoints(service, self.cluster.pods.values())
            for dns_name in service_dns_names(name, ns):
                services[dns_name] = endpoints
        return hosts, services

    def host_names(self) -> dict[str, str]:
        """The names pods call the host and the API server by, on either network: the same
        spec works whether pods have the pod network or share the host's."""
        ip = HOST_LOOPBACK if self.network is not None else "127.0.0.1"
        return {
            **dict.fromkeys(service_dns_names("kubernetes", "default"), ip),
            HOST_NAME: ip,
        }

    def refresh_names(self) -> None:
        """Rewrite running pods' /etc/hosts soon, if what they resolve changed.

        Coalesced: `names` walks every JobSet, so a burst of changes (deleting 500 TrainJobs)
        must cost one walk, not one per change; the API server shares this event loop."""
        if self.network is None or self._names_timer is not None:
            return
        self._names_timer = asyncio.get_running_loop().call_later(0.05, self._refresh_names)

    def _refresh_names(self) -> None:
        self._names_timer = None
        if not any(r.sandbox is not None for r in self.runners.values()):
            # No running pod to rewrite; a pod that starts gets the names of that moment.
            self._names_key = None
            return
        hosts, services = self.names()
        key = (sorted(hosts.items()), sorted(services.items()))
        if key == self._names_key:
            return
        self._names_key = key
        for runner in self.runners.values():
            if runner.sandbox is not None:
                with contextlib.suppress(OSError):
                    runner.sandbox.write_hosts(hosts, services)

    def _ip_busy(self, uid: str, ip: str) -> bool:
        """Another pod (a predecessor of the same name, still stopping) holds ``ip``."""
        return any(other != uid and held == ip for other, held in self.ips.items())

    def _detach(self, uid: str) -> None:
        if self.network is not None:
            PodNetwork.detach(self._pod_dir(uid))
        if self.ips.pop(uid, None) is not None and self.waiting:
            self._retry_soon()

    def _pod_dir(self, uid: str) -> Path:
        return self.home / "pods" / uid

    def _requeue_jobset(self, pod: Obj) -> None:
        key = jobset_key_of(pod)
        if key is not None:
            self.enqueue(key)

    # --- pods appear -------------------------------------------------------------------------
    def sync_pod(self, pod: Obj) -> None:
        """Start (or adopt) the pod's containers unless something already looks after it."""
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        if not uid or uid in self.cluster.terminating:
            return
        if meta.get("deletionTimestamp"):
            # Graceful deletion: the Pod object stays until its processes have ended.
            self.pod_gone(pod)
            return
        if uid in self.tasks:
            return
        phase = obj_at(pod, "status").get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        has_state = bool(read_states(self._pod_dir(uid)))
        if not has_state and phase == "Running":
            # It ran under a previous daemon and left no trace: record the loss, never re-run.
            self._spawn(uid, self._record_unknown_end(pod))
            return
        node = obj_at(pod, "spec").get("nodeName")
        if not node:
            if not has_state:
                self._schedule(pod)
            return
        if node != self.settings.node_name:
            return  # bound to a node this engine is not
        placed = self._addresses(pod)
        if placed is None:
            return  # its JobSet is gone; garbage collection removes the pod
        dns, pod_ip, group = placed
        dns = {**self.host_names(), **self.settings.extra_hosts, **dns}
        if not has_state and self._refused(pod):
            return
        owner = _owner(pod)
        why = self._admit(uid, pod, check=not has_state)
        if why is not None:
            self._wait(pod, why)
            return
        if self.network is not None:
            # Own network namespace: any port is free; only the address must be.
            if self._ip_busy(uid, pod_ip):
                self._release_node(uid)
                self.waiting[uid] = "address"
                self._retry_soon()
                return
            self.ips[uid] = pod_ip
        else:
            ports = declared_ports(pod)
            if not has_state:
                why = self.ports.blocked(owner, ports, pod_ip)
                if why is not None:
                    self._release_node(uid)
                    self._wait(pod, why)
                    return
            self.ports.claim(owner, group, ports)
        self.waiting.pop(uid, None)
        if self.settings.api_port is not None:
            pod = with_api_access(pod, self.settings.api_port)
        runner = PodRunner(
            pod,
            lambda: self._context(pod, pod_ip, dns),
            publish=lambda status: self.publish(pod, status),
            emit=lambda t, r, m: self.event(pod, t, r, m, "kubelet"),
            clock=lambda: format_time(now()),
            settings=self.settings.runner,
            pod_ip=pod_ip,
            final_failure=self.settings.final_failure,
        )
        self.runners[uid] = runner
        self._spawn(uid, self._run(runner, uid, adopt=has_state))

    def _addresses(self, pod: Obj) -> tuple[dict[str, str], str, str] | None:
        """(DNS names → address the pod's /etc/hosts adds, its address, the name its ports
        are held under). A JobSet's pods share their JobSet's block of addresses; any other
        pod gets a block of one, keyed by its uid (None: the pod's JobSet is gone)."""
        meta = pod["metadata"]
        spec = obj_at(pod, "spec")
        hostname = str(spec.get("hostname") or meta.get("name"))
        if jobset_key_of(pod) is None:
            uid = str(meta.get("uid"))
            pod_ip = self.addresses.address(self.addresses.base + self.addresses.block(uid, 1))
            ns, name = key_of(pod)
            names = pod_dns_names(hostname, spec.get("subdomain") or None, ns)
            return dict.fromkeys(names, pod_ip), pod_ip, f"{ns}/{name}"
        jobset = self.cluster.jobset_of(pod)
        if jobset is None:
            return None
        dns, by_host = self.addresses.hosts(read_spec(jobset))
        pod_ip = by_host.get(hostname) or next(iter(by_host.values()), "127.0.0.2")
        return dns, pod_ip, "/".join(key_of(jobset))

    # --- the scheduler: pods created without a node -----------------------------------------
    def _schedule(self, pod: Obj) -> None:
        """Bind a pod nobody placed (a Pod created directly, a Deployment's) to this node once
        it fits, as the default scheduler does; until then it waits, Unschedulable, saying
        why. The kubelet half runs it when the bound Pod comes back through the watch."""
        uid = str(pod["metadata"].get("uid"))
        if uid in self.binding:
            return
        spec = obj_at(pod, "spec")
        if spec.get("schedulingGates"):
            # Left alone until its gates are removed (that change brings it back here).
            if self.waiting.get(uid) != GATED_MESSAGE:
                self.waiting[uid] = GATED_MESSAGE
                stamp = format_time(now())
                gated = {
                    "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                    "message": GATED_MESSAGE, "lastProbeTime": None, "lastTransitionTime": stamp,
                }  # fmt: skip
                self._background_task(
                    self.publish(pod, {"phase": "Pending", "conditions": [gated]})
                )
            return
        why = self._admit(uid, pod, check=True)
        if why is not None:
            self._wait(pod, why)
            return
        self.waiting.pop(uid, None)
        self.binding.add(uid)
        self._background_task(self._bind(pod, uid))

    async def _bind(self, pod: Obj, uid: str) -> None:
        # A cluster's scheduler POSTs pods/binding, which stores spec.nodeName; the embedded
        # API server has no binding subresource, so the same field is set by a patch (the
        # uid makes it fail for a newer pod of the same name).
        ns, name = key_of(pod)
        try:
            await self.api.patch(
                POD.api_version,
                POD.plural,
                name,
                {"metadata": {"uid": uid}, "spec": {"nodeName": self.settings.node_name}},
                namespace=ns,
            )
        except ApiError as err:
            self._release_node(uid)
            if err.code != 404:
                log.warning("pod %s/%s not bound: %s", ns, name, err)
        finally:
            self.binding.discard(uid)

    # --- the node: resources and devices ----------------------------------------------------
    def _admit(self, uid: str, pod: Obj, *, check: bool) -> str | None:
        """Reserve the pod's requests (and whole GPUs) on the node, or say why it must wait.

        An adopted pod (``check`` False) already runs: it is recorded, never refused.
        """
        try:
            request = pod_requests(pod)
        except ValueError as err:
            log.warning("pod %s: unreadable resources, counted as none: %s", uid, err)
            request = Resources()
        if check:
            used = Resources()
            for other, held in self.requests.items():
                if other != uid:
                    used = used + held
            lacking = insufficient(request, self.allocatable, used)
            if lacking:
                return unschedulable_message(lacking)
        gpus: tuple[int, ...] = ()
        if request.gpus:
            taken = [i for other, held in self.gpus.items() if other != uid for i in held]
            gpus = assign_gpus(request.gpus, self.allocatable.gpus, taken) or ()
        self.requests[uid] = request
        self.gpus[uid] = gpus
        return None

    def _release_node(self, uid: str) -> None:
        self.gpus.pop(uid, None)
        if self.requests.pop(uid, None) is not None and self.waiting:
            self._retry_soon()

    def _device_env(self, uid: str) -> dict[str, str]:
        """The pod's GPUs by index, as the NVIDIA device plugin hands them out; a pod that
        asked for none sees none."""
        if not self.allocatable.gpus:
            return {}
        held = self.gpus.get(uid) or ()
        visible = ",".join(str(i) for i in held)
        return {"CUDA_VISIBLE_DEVICES": visible, "NVIDIA_VISIBLE_DEVICES": visible or "void"}

    def _spawn(self, uid: str, coro: Awaitable[None]) -> None:
        async def wrapped() -> None:
            try:
                await coro
            finally:
                runner = self.runners.pop(uid, None)
                self.tasks.pop(uid, None)
                self._release_node(uid)
                if runner is not None:
                    self._release_if_idle(_owner(runner.pod))

        self.tasks[uid] = asyncio.create_task(wrapped(), name=f"pod-{uid}")

    async def _run(self, runner: PodRunner, uid: str, *, adopt: bool) -> None:
        try:
            await runner.run(adopt=adopt)
            if not runner.stopping:
                # The pod ended: its sandbox goes, as a kubelet tears down a finished pod's.
                await asyncio.to_thread(self._detach, uid)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("pod %s: runner failed", runner.name)
            runner.model.fail("ExecutorError", str(err))
            with contextlib.suppress(Exception):
                await runner.publish()

    async def _record_unknown_end(self, pod: Obj) -> None:
        status = copy.deepcopy(obj_at(pod, "status"))
        stamp = format_time(now())
        for cs in dicts(status.get("containerStatuses")):
            if "terminated" not in obj_at(cs, "state"):
                cs["state"] = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": UNKNOWN_REASON,
                        "message": UNKNOWN_MESSAGE,
                        "finishedAt": stamp,
                    }
                }
                cs["ready"] = cs["started"] = False
        status.update(phase="Failed", reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE)
        await self.publish(pod, status)

    async def publish(self, pod: Obj, status: Obj) -> None:
        key = key_of(pod)
        uid = pod["metadata"].get("uid")
        current = self.cluster.pods.get(key)
        if current is None or current["metadata"].get("uid") != uid:
            return  # deleted meanwhile: a cluster's kubelet has nothing to report either
        try:
            updated = await self.api.patch(
                POD.api_version, POD.plural, key[1], {"status": status}, namespace=key[0],
                subresource="status",
            )  # fmt: skip
        except ApiError as err:
            if not err.not_found:
                log.warning("pod %s/%s: status update failed: %s", *key, err)
            return
        keep_answer(self.cluster.pods, updated)
        self._requeue_jobset(pod)

    def _refused(self, pod: Obj) -> bool:
        """Fail at once a pod this machine cannot run (the refusal hook says why)."""
        if self.settings.refusal is None:
            return False
        report = sandbox_mode()
        mode = self.settings.sandbox_mode or report.mode
        why = self.settings.refusal(pod, mode, report.reason)
        if why is None:
            return False
        uid = str(pod["metadata"].get("uid"))
        stamp = format_time(now())
        status = {
            "phase": "Failed",
            "reason": REFUSED_REASON,
            "message": why,
            "containerStatuses": [
                {
                    "name": str(c.get("name")),
                    "image": str(c.get("image", "")),
                    "ready": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 128,
                            "reason": REFUSED_REASON,
                            "message": why,
                            "startedAt": stamp,
                            "finishedAt": stamp,
                        }
                    },
                }
                for c in dicts(obj_at(pod, "spec").get("containers"))
            ],
        }

        async def fail() -> None:
            await self.event(pod, "Warning", REFUSED_REASON, why, "kubelet")
            await self.publish(pod, status)

        self._spawn(uid, fail())
        return True

    # --- pods that wait for a port ------------------------------------------------------------
    def _wait(self, pod: Obj, why: str) -> None:
        uid = str(pod["metadata"].get("uid"))
        if self.waiting.get(uid) != why:
            self.waiting[uid] = why
            stamp = format_time(now())
            status = {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": why,
                        "lastProbeTime": None,
                        "lastTransitionTime": stamp,
                    }
                ],
            }
            self._background_task(self.publish(pod, status))
            self._background_task(
                self.event(pod, "Warning", "FailedScheduling", why, "default-scheduler")
            )
        # Another process may free the port at any time: look again shortly.
        self._retry_soon()

    def _retry_soon(self) -> None:
        if self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(1.0, self._retry_waiting)

    def _retry_waiting(self) -> None:
        self._retry = None
        by_uid = {str(p["metadata"].get("uid")): p for p in self.cluster.pods.values()}
        for uid in list(self.waiting):
            pod = by_uid.get(uid)
            if pod is None:
                self.waiting.pop(uid, None)
            else:
                self.sync_pod(pod)

    def _release_if_idle(self, owner: str) -> None:
        """A JobSet with no running pod left gives its ports back."""
        if any(_owner(r.pod) == owner for r in self.runners.values()):
            return
        if self.ports.release(owner) and self.waiting:
            self._retry_waiting()

    def background(self, coro: Awaitable[None]) -> None:
        """Run ``coro`` on the side; `stop` waits for it."""
        self._background_task(coro)

    def _background_task(self, coro: Awaitable[None]) -> None:
        async def wrapped() -> None:
            await coro

        task = asyncio.get_running_loop().create_task(wrapped())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- pods go -------------------------------------------------------------------------------
    def pod_gone(self, pod: Obj) -> None:
        """The Pod object is gone (or going): stop its processes, then remove its files."""
        uid = str(pod["metadata"].get("uid", ""))
        if uid in self.cluster.terminating:
            return
        self.cluster.terminating[uid] = pod
        # The loop keeps only weak references to tasks: hold them here.
        self._background_task(self._finish_pod(pod, uid))

    async def _finish_pod(self, pod: Obj, uid: str) -> None:
        try:
            runner = self.runners.get(uid)
            if runner is not None:
                await runner.stop(self.settings.max_grace_s)
                task = self.tasks.get(uid)
                if task is not None:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(task, timeout=5)
            # Also behind a runner: one still adopting a previous daemon's processes (its
            # sandbox not yet built) had none to stop.
            await self._kill_leftovers(self._pod_dir(uid))
            # Every process has ended: the kubelet's final delete ends the graceful deletion
            # (the API server keeps a deleted pod of a node until then, so that whoever waits
            # for the pod to go waits for its processes). Already gone: a 404, ignored.
            ns, name = key_of(pod)
            with contextlib.suppress(ApiError):
                await self.api.delete(
                    POD.api_version, POD.plural, name, namespace=ns, uid=uid,
                    grace_period_seconds=0,
                )  # fmt: skip
            await asyncio.to_thread(self._remove_files, uid, ns, name)
        finally:
            if jobset_key_of(pod) is None:
                self.addresses.release(uid)
            self._release_node(uid)  # also what a pod bound but never started had reserved
            self.cluster.terminating.pop(uid, None)
            self.waiting.pop(uid, None)
            self.ips.pop(uid, None)
            self._release_if_idle(_owner(pod))
            self._requeue_jobset(pod)

    def _remove_files(self, uid: str, namespace: str, name: str) -> None:
        if self.network is not None:
            PodNetwork.detach(self._pod_dir(uid))
        shutil.rmtree(self._pod_dir(uid), ignore_errors=True)
        shutil.rmtree(self.home / "logs" / namespace / name, ignore_errors=True)

    async def _kill_leftovers(self, pod_dir: Path, grace_s: float | None = None) -> None:
        procs = [ContainerProcess.adopt(s) for s in read_states(pod_dir)]
        grace = self.settings.max_grace_s if grace_s is None else grace_s
        await asyncio.gather(*(p.terminate(grace) for p in procs if p.is_alive()))

    async def reap_orphans(self) -> None:
        """Processes of pods that no longer exist in the API: stop them, drop their files."""
        known = {str(p["metadata"].get("uid")) for p in self.cluster.pods.values()}
        root = self.home / "pods"
        if not root.is_dir():
            return
        for pod_dir in root.iterdir():
            if pod_dir.name in known or not pod_dir.is_dir():
                continue
            await self._kill_leftovers(pod_dir)
            self.addresses.release(pod_dir.name)  # a pod of no JobSet held a block of its own
            PodNetwork.detach(pod_dir)
            shutil.rmtree(pod_dir, ignore_errors=True)

    def jobset_gone(self, jobset: Obj) -> None:
        spec = read_spec(jobset)
        self.addresses.release(spec.uid)
        # PVCs of volumeClaimPolicies with whenDeleted: Delete (the default) go with the JobSet.
        for policy in dicts(obj_at(jobset, "spec").get("volumeClaimPolicies")):
            if (obj_at(policy, "retentionPolicy").get("whenDeleted") or "Delete") != "Delete":
                continue
            for template in dicts(policy.get("templates")):
                claim = f"{obj_at(template, 'metadata').get('name', '')}-{spec.name}"
                shutil.rmtree(self.home / "volumes" / spec.namespace / claim, ignore_errors=True)

    async def stop(self, *, kill_pods: bool) -> None:
        """Stop looking after pods; their processes live on unless ``kill_pods``."""
        if self._retry is not None:
            self._retry.cancel()
        if self._names_timer is not None:
            self._names_timer.cancel()
        self.ports.close()
        if kill_pods:
            await asyncio.gather(
                *(r.stop(0) for r in self.runners.values()), return_exceptions=True
            )
        if self._background:
            await asyncio.wait(set(self._background), timeout=10)
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if kill_pods:
            # Every pod's recorded processes, not only the runners': a pod adopted from a
            # previous daemon whose sandbox was not yet built, or one not yet started again
            # (waiting, not yet synced), has a runner with nothing to stop, or none.
            root = self.home / "pods"
            dirs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
            await asyncio.gather(*(self._kill_leftovers(d, 0) for d in dirs))
        if self.network is not None:
            # Pods left running keep their network for the next daemon to adopt.
            alive = any(
                r.sandbox is not None and r.sandbox.is_alive() for r in self.runners.values()
            )
            if kill_pods or not alive:
                await asyncio.to_thread(self._close_network)

    def _close_network(self) -> None:
        assert self.network is not None
        for uid in list(self.ips):
            PodNetwork.detach(self._pod_dir(uid))
        self.network.close()

    # --- what a pod's sandbox needs ---------------------------------------------------------
    async def _context(self, pod: Obj, pod_ip: str, hosts: dict[str, str]) -> SandboxContext:
        ns = str(pod["metadata"].get("namespace") or "default")
        cm_names, secret_names, audiences = pod_references(pod)
        config_maps: dict[str, dict[str, str]] = {}
        secrets: dict[str, dict[str, bytes]] = {}
        # Missing ones are left out: the sandbox then fails the way a kubelet does (or skips
        # them when the reference is optional).
        for name in cm_names:
            with contextlib.suppress(ApiError):
                cm = await self.api.get(CONFIGMAP.api_version, CONFIGMAP.plural, name, namespace=ns)
                data = dict(obj_at(cm, "data"))
                for k, v in obj_at(cm, "binaryData").items():
                    data[k] = base64.b64decode(v).decode(errors="replace")
                config_maps[name] = data
        for name in secret_names:
            with contextlib.suppress(ApiError):
                sec = await self.api.get(SECRET.api_version, SECRET.plural, name, namespace=ns)
                decoded = {k: base64.b64decode(v) for k, v in obj_at(sec, "data").items()}
                decoded.update({k: str(v).encode() for k, v in obj_at(sec, "stringData").items()})
                secrets[name] = decoded
        if ROOT_CA in cm_names and ROOT_CA not in config_maps and self.settings.api_ca_pem:
            # What kube-controller-manager publishes in every namespace: the API server's CA.
            config_maps[ROOT_CA] = {"ca.crt": self.settings.api_ca_pem.decode()}
        tokens: dict[str, str] = {}
        provider = self.settings.token_provider
        for audience in audiences:
            try:
                tokens[audience] = await provider(pod, audience) if provider else UNSIGNED_TOKEN
            except ApiError as err:
                # E.g. the pod's ServiceAccount does not exist (yet): retried, as a kubelet does.
                raise SandboxError(f"service account token: {err}") from err
        pod_dir = self._pod_dir(str(pod["metadata"]["uid"]))
        services: dict[str, list[str]] = {}
        enter: tuple[str, ...] = ()
        if self.network is not None:
            hosts, services = self.names()
            try:
                pause = await asyncio.to_thread(self.network.attach, pod_dir, pod_ip)
            except NetworkUnavailable as err:
                raise SandboxError(f"pod network: {err}", reason="NetworkNotReady") from err
            enter = tuple(self.network.enter_pod(pause))
        return SandboxContext(
            pod_dir=pod_dir,
            log_dir=self.home / "logs",
            pod_ip=pod_ip,
            hosts=hosts,
            services=services,
            enter_netns=enter,
            device_env=self._device_env(str(pod["metadata"]["uid"])),
            cgroups=cgroup_probe().tree if self.settings.enforce_limits else None,
            cgroup_key=self._cgroup_key,
            claims_dir=self.home / "volumes",
            config_maps=config_maps,
            secrets=secrets,
            tokens=tokens,
            images=self.settings.images,
            node_name=self.settings.node_name,
            mode=self.settings.sandbox_mode,
            overlay=self.settings.overlay,
            engine_home=self.home,
        )


def _owner(pod: Obj) -> str:
    """The uid of the pod's JobSet (label, else controller reference); a pod of no JobSet
    is its own owner (its ports are its own, not its ReplicaSet's)."""
    meta = obj_at(pod, "metadata")
    uid = obj_at(meta, "labels").get(JOBSET_UID)
    if uid:
        return str(uid)
    if jobset_key_of(pod) is None:
        return str(meta.get("uid", ""))
    refs = [r for r in dicts(meta.get("ownerReferences")) if r.get("controller")]
    return str(refs[0].get("uid")) if refs else str(meta.get("uid", ""))
