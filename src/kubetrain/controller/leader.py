"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Only one controller replica reconciles at a time. A candidate takes the Lease when it does not
exist or its holder has not renewed it for ``lease_duration`` seconds, measured on the candidate's
own clock from when it *last saw the record change* (so clock skew between replicas does not
matter). The leader renews every ``retry_period``; if it cannot renew for ``renew_deadline`` it
has lost leadership and must stop reconciling at once. Every write is an optimistic-concurrency
update (resourceVersion), so two candidates can never both win the same round.

Upstream's values: Lease ``trainer.kubeflow.org``, 15 s / 10 s / 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from kubetrain.api.access import obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.kinds import LEASE
from kubetrain.kube.loop import RETRIED

__all__ = ["LeaderElector", "default_identity"]

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def _micro_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str = "trainer.kubeflow.org",
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.identity = identity or default_identity()
        self._client = client
        self._namespace = namespace
        self._name = name
        self._duration = lease_duration
        self._deadline = renew_deadline
        self._retry = retry_period
        self._wall = wall_clock
        # What we last saw of the Lease, and when (monotonic) we saw it change.
        self._observed: Obj | None = None
        self._observed_spec: Obj | None = None
        self._observed_at = 0.0
        self.is_leader = False
        self._waiting_for: str | None = None  # the holder last reported while we wait

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this candidate holds the Lease (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if await self._try_acquire_or_renew():
                self.is_leader = True
                log.info(
                    "%s became leader of lease %s/%s", self.identity, self._namespace, self._name
                )
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._retry)
        return False

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew until ``stop`` is set (then release) or renewal fails for ``renew_deadline``
        (then return with ``is_leader`` False: the caller must stop reconciling)."""
        last_renew = time.monotonic()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self._retry)
                break
            except TimeoutError:
                pass
            # A renewal that hangs (server unreachable) must not outlive the renew deadline.
            budget = max(0.1, self._deadline - (time.monotonic() - last_renew))
            try:
                renewed = await asyncio.wait_for(self._try_acquire_or_renew(), budget)
            except TimeoutError:
                renewed = False
            if renewed:
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self._deadline:
                self.is_leader = False
                log.warning(
                    "%s lost leadership of %s/%s", self.identity, self._namespace, self._name
                )
                return
        await self.release()

    async def release(self) -> None:
        """Give the Lease up at once so a follower need not wait for it to expire."""
        if not self.is_leader or self._observed is None:
            return
        self.is_leader = False
        lease = dict(self._observed)
        spec = dict(obj_at(lease, "spec"))
        spec.update(
            holderIdentity=None,
            leaseDurationSeconds=1,
            renewTime=_micro_time(self._wall()),
        )
        lease["spec"] = spec
        try:
            await self._client.replace(LEASE.api_version, LEASE.plural, lease)
        except RETRIED as err:
            log.info("could not release lease: %s", err)

    async def _try_acquire_or_renew(self) -> bool:
        now = self._wall()
        try:
            lease = await self._client.get(
                LEASE.api_version, LEASE.plural, self._name, namespace=self._namespace
            )
        except ApiError as err:
            if not err.not_found:
                log.info("reading lease: %s", err)
                return False
            return await self._create(now)
        except TRANSPORT_ERRORS as err:
            log.info("reading lease: %s", err)
            return False
        spec = dict(obj_at(lease, "spec"))
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = time.monotonic()
        self._observed = lease
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self._duration)
        if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
            if holder != self._waiting_for:
                self._waiting_for = holder
                log.info(
                    "lease %s/%s is held by %s; %s waits as a follower",
                    self._namespace, self._name, holder, self.identity,
                )  # fmt: skip
            return False  # someone else holds it and renewed it recently
        self._waiting_for = None
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self._duration),
            renewTime=_micro_time(now),
        )
        updated = {**lease, "spec": new_spec}
        try:
            written = await self._client.replace(LEASE.api_version, LEASE.plural, updated)
        except RETRIED as err:
            log.info("updating lease: %s", err)  # 409: another candidate won this round
            return False
        self._remember(written)
        return True

    async def _create(self, now: datetime) -> bool:
        lease = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self._duration),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            written = await self._client.create(LEASE.api_version, LEASE.plural, lease)
        except RETRIED as err:
            log.info("creating lease: %s", err)  # 409: another candidate created it first
            return False
        self._remember(written)
        return True

    def _remember(self, lease: Obj) -> None:
        self._observed = lease
        self._observed_spec = dict(obj_at(lease, "spec"))
        self._observed_at = time.monotonic()
