"""The cache initializer against the embedded API server with the LeaderWorkerSet controller:
it makes its objects and returns once the cache is Available; a missing table or a cache that
never becomes ready ends it with one line saying so. Pods are marked Ready here as a kubelet
would (the executor runs them in the engine's own tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.schema import crd_manifests
from kubetrain.controller import connect
from kubetrain.initializers import InitializerError, run
from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.lws import LwsController, lws_crd

LWS = ("leaderworkerset.x-k8s.io/v1", "leaderworkersets")


@pytest.fixture
async def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeClient]:
    server = ApiServer(
        tmp_path, in_memory=True, crds=[*crd_manifests(descriptions=False), lws_crd()]
    )
    await server.start()
    kubeconfig = server.write_kubeconfig()
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    client = connect(kubeconfig)
    stop = asyncio.Event()
    task = asyncio.create_task(LwsController(client).run(stop))
    await client.create(
        "trainer.kubeflow.org/v1alpha1", "trainjobs",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"runtimeRef": {"name": "torch-distributed-with-cache"}},
        },
    )  # fmt: skip
    try:
        yield client
    finally:
        stop.set()
        await task
        await client.close()
        await server.close()


def cache_env(table: Any, **extra: str) -> dict[str, str]:
    return {
        "STORAGE_URI": "cache://reviews/train",
        "TRAIN_JOB_NAME": "job",
        "CACHE_IMAGE": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0",
        "METADATA_LOC": table.metadata_loc,
        "CLUSTER_SIZE": "2",
        # Bounded below the test's own timeout: a cache stuck unready fails with the
        # initializer's message naming its pods, never as a hung test.
        "CACHE_READY_TIMEOUT_SECONDS": "120",
        **table.aws_env(),
        **extra,
    }


async def mark_pods_ready(kube: KubeClient) -> None:
    """Mark every pod Ready as a kubelet would once its probe passes, pods made later too."""
    while True:
        pods, _ = await kube.list("v1", "pods", namespace="default")
        for pod in pods:
            conditions = pod.get("status", {}).get("conditions", [])
            if {"type": "Ready", "status": "True"} in conditions:
                continue
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            await kube.patch(
                "v1", "pods", pod["metadata"]["name"], {"status": status},
                namespace="default", subresource="status",
            )  # fmt: skip
        await asyncio.sleep(0.1)


async def initialize_beside(kube: KubeClient, env: dict[str, str], out: Path) -> None:
    """Run the initializer while `mark_pods_ready` plays the kubelet. Should the marker fail
    (an API error), the test fails with its error then: the initializer alone would wait for
    a cache that can no longer become ready until its own deadline."""
    initializer = asyncio.ensure_future(asyncio.to_thread(run, "dataset", env, out))
    marker = asyncio.ensure_future(mark_pods_ready(kube))
    try:
        await asyncio.wait({initializer, marker}, return_when=asyncio.FIRST_COMPLETED)
        if marker.done():
            marker.result()
        await initializer
    finally:
        marker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await marker


async def test_the_initializer_creates_the_cache_and_returns_once_it_is_available(
    kube: KubeClient, iceberg_table: Any, tmp_path: Path
) -> None:
    await initialize_beside(kube, cache_env(iceberg_table), tmp_path / "out")
    lws = await kube.get(*LWS, "job-cache", namespace="default")
    assert lws["metadata"]["ownerReferences"][0]["name"] == "job"
    conditions = {c["type"]: c["status"] for c in lws["status"]["conditions"]}
    assert conditions == {"Progressing": "False", "Available": "True"}
    service = await kube.get("v1", "services", "job-cache-service", namespace="default")
    assert service["spec"]["selector"] == {"app": "job-cache-head"}
    await kube.get("v1", "serviceaccounts", "job-cache", namespace="default")


async def test_a_missing_table_fails_before_anything_is_created(
    kube: KubeClient, iceberg_table: Any, tmp_path: Path
) -> None:
    env = cache_env(iceberg_table, METADATA_LOC="s3://datacache/nowhere/v1.metadata.json")
    with pytest.raises(
        InitializerError, match=r"table reviews\.train: cannot read s3://datacache/nowhere"
    ):
        await asyncio.to_thread(run, "dataset", env, tmp_path / "out")
    items, _ = await kube.list(*LWS, namespace="default")
    assert items == []


async def test_a_cache_that_never_becomes_ready_fails_naming_its_pods(
    kube: KubeClient, iceberg_table: Any, tmp_path: Path
) -> None:
    # A first run makes the objects and gives up at once; once the cache's leader exists, a
    # second (a rerun finds the objects there) waits 2 s for it in vain and names it. Waiting
    # for the pod, not for a time, keeps the message the same on a busy machine.
    with pytest.raises(InitializerError, match=r"not Available after 0 s"):
        env = cache_env(iceberg_table, CACHE_READY_TIMEOUT_SECONDS="0")
        await asyncio.to_thread(run, "dataset", env, tmp_path / "out")
    for _ in range(600):
        if (await kube.list("v1", "pods", namespace="default"))[0]:
            break
        await asyncio.sleep(0.1)
    env = cache_env(iceberg_table, CACHE_READY_TIMEOUT_SECONDS="2")
    with pytest.raises(InitializerError, match=r"not Available after 2 s; not ready: job-cache-0"):
        await asyncio.to_thread(run, "dataset", env, tmp_path / "out")
