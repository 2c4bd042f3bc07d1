"""Informers against the real API server: relist after 410, deletions missed while away, bookmarks,
the caller's own writes coming back, what the cache keeps."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TypeVar

import pytest
from controller_plane import PrivateServer, eventually

from kubetrain.api.types import Obj
from kubetrain.controller import connect
from kubetrain.kube.informer import Backoff, Informer
from kubetrain.kube.kinds import CONFIGMAP, LEASE

T = TypeVar("T")


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


def _metadata_only(obj: Obj) -> Obj:
    return {k: obj[k] for k in ("apiVersion", "kind", "metadata")}


@pytest.mark.parametrize(
    ("acted_on", "reported"),
    [
        pytest.param(
            False, {("ADDED", "ours"), ("MODIFIED", "theirs")}, id="an observed write is reported"
        ),
        pytest.param(
            True,
            {("MODIFIED", "theirs")},
            id="a write the caller acted on is not reported when it comes back",
        ),
    ],
)
async def test_own_writes_coming_back_and_what_the_cache_keeps(
    tmp_path: Path, torch_runtime: Obj, acted_on: bool, reported: set[tuple[str, str]]
) -> None:
    private = PrivateServer(tmp_path / "home", torch_runtime)
    server = await private.start()
    kube = connect(server.write_kubeconfig(tmp_path / "kc"))
    informer = Informer(kube, CONFIGMAP, namespace="default", transform=_metadata_only)
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    try:
        await kube.create("v1", "configmaps", configmap("theirs"))
        await _stop(await _run(informer))
        seen.clear()
        # While the informer is away (so the order is fixed): the caller writes "ours" and
        # observes it, then someone else changes "theirs". The watch resumes and brings both.
        ours = await kube.create("v1", "configmaps", configmap("ours"))
        informer.observe(ours, acted_on=acted_on)
        await kube.patch("v1", "configmaps", "theirs", {"data": {"k": "v"}}, namespace="default")
        task = asyncio.create_task(informer.run())
        await eventually(lambda: _async(("MODIFIED", "theirs") in seen), what="their change")
        assert set(seen) == reported

        # Anyone else's change to "ours" is reported either way.
        await kube.patch("v1", "configmaps", "ours", {"data": {"k": "v"}}, namespace="default")
        await eventually(lambda: _async(("MODIFIED", "ours") in seen), what="a change to ours")
        await _stop(task)
    finally:
        await kube.close()
        await private.stop()

    cached = informer.get("ours", "default")
    assert cached is not None and "data" not in cached, "the cache holds what transform kept"
    assert cached["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("acted_on", "reported"),
    [
        pytest.param(
            False, [("ADDED", "ours")], id="an event held during a write is reported after it"
        ),
        pytest.param(
            True, [], id="the event of a write the caller acted on is dropped though it came first"
        ),
    ],
)
async def test_the_event_of_a_write_read_before_its_answer(
    tmp_path: Path, torch_runtime: Obj, acted_on: bool, reported: list[tuple[str, str]]
) -> None:
    private = PrivateServer(tmp_path / "home", torch_runtime)
    server = await private.start()
    kube = connect(server.write_kubeconfig(tmp_path / "kc"))
    informer = Informer(kube, CONFIGMAP, namespace="default")
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    try:
        task = await _run(informer)
        with informer.writing("ours", "default"):
            ours = await kube.create("v1", "configmaps", configmap("ours"))
            # The watch event arrives before the caller takes the answer (the order that used
            # to queue a reconcile of the controller's own write): cached, not yet reported.
            await eventually(lambda: _async(informer.get("ours", "default")), what="ours cached")
            assert seen == []
            informer.observe(ours, acted_on=acted_on)
        assert seen == reported
        await kube.patch("v1", "configmaps", "ours", {"data": {"k": "v"}}, namespace="default")
        await eventually(lambda: _async(("MODIFIED", "ours") in seen), what="a change to ours")
        await _stop(task)
    finally:
        await kube.close()
        await private.stop()


async def test_the_answer_of_a_write_read_after_the_deletion_does_not_bring_the_object_back(
    tmp_path: Path, torch_runtime: Obj
) -> None:
    private = PrivateServer(tmp_path / "home", torch_runtime)
    server = await private.start()
    kube = connect(server.write_kubeconfig(tmp_path / "kc"))
    informer = Informer(kube, CONFIGMAP, namespace="default")
    deleted: list[str] = []
    informer.add_handler(
        lambda kind, obj: deleted.append(obj["metadata"]["name"]) if kind == "DELETED" else None
    )
    try:
        task = await _run(informer)
        await kube.create("v1", "configmaps", configmap("ours"))
        answer = await kube.patch(
            "v1", "configmaps", "ours", {"data": {"k": "v"}}, namespace="default"
        )
        await kube.delete("v1", "configmaps", "ours", namespace="default")
        await eventually(lambda: _async("ours" in deleted), what="the deletion")
        # The answer of the patch, taken only now: the watch is past its version.
        informer.observe(answer, acted_on=True)
        assert informer.get("ours", "default") is None
        # A write the watch has not reached yet is taken as before.
        fresh = await kube.create("v1", "configmaps", configmap("fresh"))
        informer.observe(fresh)
        assert informer.get("fresh", "default") is not None
        await _stop(task)
    finally:
        await kube.close()
        await private.stop()


async def _async(value: T) -> T:
    return value
