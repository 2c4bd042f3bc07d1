"""Informers against the real API server: relist after 410, deletions missed while away, bookmarks."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from controller_plane import PrivateServer, eventually

from kubetrain.api.types import Obj
from kubetrain.controller import connect
from kubetrain.kube.informer import Backoff, Informer
from kubetrain.kube.kinds import CONFIGMAP, LEASE


def configmap(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"k": name},
    }


async def _run(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_an_expired_watch_relists_and_reports_what_vanished_meanwhile(
    tmp_path: Path, torch_runtime: Obj
) -> None:
    private = PrivateServer(tmp_path / "home", torch_runtime, history=5)
    server = await private.start()
    kube = connect(server.write_kubeconfig(tmp_path / "kc"))
    informer = Informer(kube, CONFIGMAP, namespace="default", backoff=Backoff(initial=0.05))
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    try:
        await kube.create("v1", "configmaps", configmap("old"))
        task = await _run(informer)
        await eventually(lambda: _async(informer.get("old", "default")), what="old cached")
        await _stop(task)  # away: the history moves on past the informer's resourceVersion

        await kube.delete("v1", "configmaps", "old", namespace="default")
        for i in range(10):
            await kube.create("v1", "configmaps", configmap(f"new-{i}"))
        seen.clear()
        task = await _run(informer)
        await eventually(lambda: _async(informer.get("new-9", "default")), what="new-9 cached")
        await _stop(task)
    finally:
        await kube.close()
        await private.stop()

    assert informer.lists == 2, "410 Expired must lead to exactly one relist"
    assert ("DELETED", "old") in seen, "a deletion missed while away is reported after the relist"
    assert {n for k, n in seen if k == "ADDED"} >= {f"new-{i}" for i in range(10)}
    assert informer.get("old", "default") is None


async def test_bookmarks_move_an_idle_watch_forward(tmp_path: Path, torch_runtime: Obj) -> None:
    private = PrivateServer(tmp_path / "home", torch_runtime)
    server = await private.start()
    kube = connect(server.write_kubeconfig(tmp_path / "kc"))
    leases = Informer(kube, LEASE, namespace="default")
    try:
        task = await _run(leases)
        before = int(leases.resource_version or 0)
        for i in range(3):
            await kube.create("v1", "configmaps", configmap(f"cm-{i}"))

        async def advanced() -> bool:
            return int(leases.resource_version or 0) > before

        await eventually(advanced, timeout=5, what="a bookmark")
        assert len(leases) == 0
        await _stop(task)
    finally:
        await kube.close()
        await private.stop()


async def _async(value: Obj | None) -> Obj | None:
    return value
