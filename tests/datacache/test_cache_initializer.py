"""The cache initializer against the embedded API server with the LeaderWorkerSet controller:
it makes its objects and returns once the cache is Available; a missing table or a cache that
never becomes ready ends it with one line saying so. Pods are marked Ready here as a kubelet
would (the executor runs them in the engine's own tests)."""

from __future__ import annotations

import asyncio
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
        **table.aws_env(),
        **extra,
    }


async def mark_ready_when_they_appear(kube: KubeClient) -> None:
    done: set[str] = set()
    while len(done) < 2:
        pods, _ = await kube.list("v1", "pods", namespace="default")
        for pod in pods:
            name = pod["metadata"]["name"]
            if name in done:
                continue
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            await kube.patch(
                "v1", "pods", name, {"status": status}, namespace="default", subresource="status"
            )
            done.add(name)
        await asyncio.sleep(0.1)


async def test_the_initializer_creates_the_cache_and_returns_once_it_is_available(
    kube: KubeClient, iceberg_table: Any, tmp_path: Path
) -> None:
    marker = asyncio.create_task(mark_ready_when_they_appear(kube))
    await asyncio.to_thread(run, "dataset", cache_env(iceberg_table), tmp_path / "out")
    await marker
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
    env = cache_env(iceberg_table, CACHE_READY_TIMEOUT_SECONDS="2")
    with pytest.raises(InitializerError, match=r"not Available after 2 s; not ready: job-cache-0"):
        await asyncio.to_thread(run, "dataset", env, tmp_path / "out")
