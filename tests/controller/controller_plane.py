"""The controller tests' plane and helpers: the embedded API server, a controller per test, small waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubetrain.api.types import Obj
from kubetrain.controller import Controller, KubeClient, connect
from kubetrain.kube.client import ApiError
from kubetrain.kube.workqueue import RateLimit
from kubetrain.local.apiserver import ApiServer

T = TypeVar("T")

TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSETS = ("jobset.x-k8s.io/v1alpha2", "jobsets")
TRAINJOBS = (TRAINER, "trainjobs")
CONFIGMAPS = ("v1", "configmaps")
EVENTS = ("v1", "events")
# Fast retries: tests wait for convergence, not for production backoff.
FAST = RateLimit(base_delay=0.01, max_delay=0.5, qps=1000, burst=1000)


@dataclass
class Plane:
    """A namespace on the shared server, a client, and controllers started on demand."""

    kubeconfig: Path
    namespace: str
    kube: KubeClient
    controllers: list[tuple[Controller, asyncio.Event, asyncio.Task[None]]] = field(
        default_factory=list
    )

    async def start_controller(
        self, client: KubeClient | None = None, **options: Any
    ) -> Controller:
        options.setdefault("namespace", self.namespace)
        options.setdefault("rate_limit", FAST)
        options.setdefault("runtime_grace", 0.5)
        controller = Controller(client or connect(self.kubeconfig), **options)
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        self.controllers.append((controller, stop, task))
        ready = asyncio.create_task(controller.ready.wait())
        await asyncio.wait({ready, task}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            ready.cancel()
            task.result()  # raises what stopped it
        assert controller.ready.is_set(), "controller did not become ready in 10 s"
        return controller

    async def stop_controller(self, controller: Controller) -> None:
        for entry in list(self.controllers):
            if entry[0] is controller:
                self.controllers.remove(entry)
                _, stop, task = entry
                stop.set()
                await asyncio.wait_for(task, 10)
                await controller.client.close()

    async def close(self) -> None:
        for controller, _, _ in list(self.controllers):
            await self.stop_controller(controller)
        await self.kube.close()

    # --- objects --------------------------------------------------------------------------

    def trainjob(self, name: str, **spec: Any) -> Obj:
        body: Obj = {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}}
        body.update(spec)
        return {
            "apiVersion": TRAINER,
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": body,
        }

    async def create_trainjob(self, name: str, **spec: Any) -> Obj:
        return await self.kube.create(*TRAINJOBS, self.trainjob(name, **spec))

    async def spoil_snapshot(self, name: str) -> None:
        """A runtime snapshot ConfigMap that is not TrainJob ``name``'s: its rendering fails for
        good."""
        await self.kube.create(
            *CONFIGMAPS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{name}-runtime-snapshot", "namespace": self.namespace},
                "data": {"runtime": "kind: Nothing"},
            },
        )

    async def get(self, kind: tuple[str, str], name: str) -> Obj | None:
        try:
            return await self.kube.get(*kind, name, namespace=self.namespace)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def trainjob_status(self, name: str) -> Obj:
        job = await self.get(TRAINJOBS, name)
        assert job is not None
        status: Obj = job.get("status") or {}
        return status

    async def set_jobset_status(self, name: str, status: Obj) -> None:
        """Write JobSet status as the JobSet controller (or the local executor) would."""
        await self.kube.patch(
            *JOBSETS, name, {"status": status}, namespace=self.namespace, subresource="status"
        )

    async def events(self, involved: str | None = None) -> list[Obj]:
        items, _ = await self.kube.list(*EVENTS, namespace=self.namespace)
        return [
            e
            for e in items
            if involved is None or (e.get("involvedObject") or {}).get("name") == involved
        ]

    async def patch_trainjob(self, name: str, body: Obj) -> Obj:
        return await self.kube.patch(*TRAINJOBS, name, body, namespace=self.namespace)


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def condition(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


class PrivateServer:
    """An API server in this test's loop that can be stopped and started again on the same
    port and the same SQLite database (as after a daemon restart)."""

    def __init__(self, home: Path, runtime: Obj, history: int = 50_000) -> None:
        from kubetrain.api.schema import crd_manifests

        self._home = home
        self._runtime = runtime
        self._crds = crd_manifests()
        self.history = history
        self.port = 0
        self.server: ApiServer | None = None

    async def start(self) -> ApiServer:
        server = ApiServer(
            self._home,
            port=self.port,
            crds=self._crds,
            seed_objects=[self._runtime],
            tls=False,
            bookmark_interval=0.5,
            history=self.history,
        )
        await server.start()
        self.port = server.port
        self.server = server
        return server

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.close()
