"""lightkube (sync and async), the controller's client, against the server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from apiserver_support import Cluster, condition, trainjob
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

TrainJob = create_namespaced_resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
JobSet = create_namespaced_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")


@pytest.fixture
def lk(cluster: Cluster, ns: str) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), namespace=ns, field_manager="lk-test")
    yield client
    client._client.close()  # lightkube keeps no public close; release the pool


def _jobset(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"replicatedJobs": []},
    }


def test_sync_crud_and_a_404_as_api_error(lk: Client) -> None:
    created = lk.create(TrainJob.from_dict(trainjob("lk", labels={"team": "a"})))
    assert created.metadata.uid
    assert lk.get(TrainJob, "lk").spec["trainer"]["numNodes"] == 1
    assert [o.metadata.name for o in lk.list(TrainJob, labels={"team": "a"})] == ["lk"]
    with pytest.raises(ApiError) as err:
        lk.get(TrainJob, "nope")
    assert err.value.status.code == 404


def test_default_strategic_patch_is_415_and_merge_patch_works(lk: Client) -> None:
    lk.create(TrainJob.from_dict(trainjob("pt")))
    with pytest.raises(ApiError) as err:
        lk.patch(TrainJob, "pt", {"spec": {"suspend": True}})
    assert err.value.status.code == 415
    patched = lk.patch(TrainJob, "pt", {"spec": {"suspend": True}}, patch_type=PatchType.MERGE)
    assert patched.spec["suspend"] is True


def test_apply_is_idempotent_and_status_apply_uses_its_own_manager(lk: Client) -> None:
    first = lk.apply(TrainJob.from_dict(trainjob("ap")), field_manager="trainer")
    again = lk.apply(TrainJob.from_dict(trainjob("ap")), field_manager="trainer")
    assert again.metadata.resourceVersion == first.metadata.resourceVersion, (
        "a no-op apply keeps the resourceVersion"
    )
    status = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "ap"},
        "status": {"conditions": [condition()]},
    }
    lk.apply(TrainJob.Status.from_dict(status), field_manager="trainer-status")
    stored = lk.get(TrainJob, "ap")
    assert stored.status["conditions"][0]["type"] == "Complete"
    managers = {(m.manager, m.subresource) for m in stored.metadata.managedFields}
    assert ("trainer-status", "status") in managers and ("trainer", None) in managers


def test_deleting_the_owner_collects_the_owned_jobset(lk: Client) -> None:
    owner = lk.create(TrainJob.from_dict(trainjob("own"))).to_dict()
    lk.apply(JobSet.from_dict(_jobset("own", owner)), field_manager="trainer")
    lk.delete(TrainJob, "own")
    with pytest.raises(ApiError) as err:
        lk.get(JobSet, "own")
    assert err.value.status.code == 404


async def test_async_watch_sees_a_lifecycle(cluster: Cluster, ns: str) -> None:
    client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), namespace=ns)
    try:
        await client.create(TrainJob.from_dict(trainjob("sentinel")))
        seen: list[tuple[str, str]] = []
        opened = asyncio.Event()

        async def watch() -> None:
            async for kind, obj in client.watch(TrainJob, server_timeout=30):
                seen.append((kind, obj.metadata.name))
                opened.set()
                if kind == "DELETED":
                    return

        task = asyncio.create_task(watch())
        await asyncio.wait_for(opened.wait(), 30)  # the sentinel's ADDED: the watch is open
        await client.create(TrainJob.from_dict(trainjob("aw")))
        await client.patch(TrainJob, "aw", {"spec": {"suspend": True}}, patch_type=PatchType.MERGE)
        await client.delete(TrainJob, "aw")
        await asyncio.wait_for(task, 30)
        assert [k for k, name in seen if name == "aw"] == ["ADDED", "MODIFIED", "DELETED"]
    finally:
        await client.close()
