"""The LeaderWorkerSet controller against the embedded API server: the pods of each group
with LWS's names, labels, env and leader address; defaults from the CRD; ``Available`` once
every pod is Ready; a restarted pod recreates its whole group. Pod status is written here as
a kubelet writes it (the kubelet's own readiness is the executor's business)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.controller import connect
from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.lws import LwsController, lws_crd

LWS = ("leaderworkerset.x-k8s.io/v1", "leaderworkersets")


def cache_lws(name: str = "job-cache", size: int = 3) -> dict[str, Any]:
    """The LeaderWorkerSet upstream's cache initializer creates (trimmed to what matters)."""
    probe = {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1}

    def container(role: str) -> dict[str, Any]:
        return {
            "name": role, "image": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0",
            "command": [role], "args": ["0.0.0.0", "50051"],
            "env": [{"name": "TABLE_NAME", "value": "train"}],
            "readinessProbe": probe,
        }  # fmt: skip

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": {
                    "metadata": {"labels": {"app": f"{name}-head"}},
                    "spec": {"containers": [container("head")]},
                },
                "workerTemplate": {"spec": {"containers": [container("worker")]}},
            },
        },
    }


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = ApiServer(tmp_path, in_memory=True, crds=[lws_crd()])
    await server.start()
    kube = connect(server.write_kubeconfig())
    stop = asyncio.Event()
    task = asyncio.create_task(LwsController(kube).run(stop))
    try:
        yield kube
    finally:
        stop.set()
        await task
        await kube.close()
        await server.close()


async def eventually(check: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 20) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        got = await check()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(0.05)


async def pods_of(kube: KubeClient, name: str) -> dict[str, Any]:
    items, _ = await kube.list("v1", "pods", namespace="default")
    return {
        p["metadata"]["name"]: p
        for p in items
        if p["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name") == name
        and not p["metadata"].get("deletionTimestamp")
    }


async def make_ready(kube: KubeClient, pod: dict[str, Any], restarts: int = 0) -> None:
    name = pod["spec"]["containers"][0]["name"]
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": name, "ready": True, "restartCount": restarts, "image": "x", "imageID": "",
             "started": True, "state": {"running": {}}},
        ],
    }  # fmt: skip
    await kube.patch(
        "v1", "pods", pod["metadata"]["name"], {"status": status},
        namespace="default", subresource="status",
    )  # fmt: skip


async def test_a_group_is_a_leader_and_its_workers_with_lws_names_labels_and_env(
    client: KubeClient,
) -> None:
    await client.create(*LWS, cache_lws())
    pods = await eventually(
        lambda: _when(pods_of(client, "job-cache"), lambda p: len(p) == 3), "three pods"
    )
    assert sorted(pods) == ["job-cache-0", "job-cache-0-1", "job-cache-0-2"]
    leader, worker = pods["job-cache-0"], pods["job-cache-0-2"]
    assert leader["metadata"]["labels"]["app"] == "job-cache-head"
    assert "app" not in worker["metadata"]["labels"]
    for pod, index in ((leader, "0"), (worker, "2")):
        labels = pod["metadata"]["labels"]
        assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "0"
        assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == index
        assert pod["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] == "3"
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (
            pod["metadata"]["name"], "job-cache",
        )  # fmt: skip
        env = pod["spec"]["containers"][0]["env"]
        assert env == [
            {"name": "LWS_LEADER_ADDRESS", "value": "job-cache-0.job-cache.default"},
            {"name": "LWS_GROUP_SIZE", "value": "3"},
            {"name": "LWS_WORKER_INDEX", "value": index},
            {"name": "TABLE_NAME", "value": "train"},
        ]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    assert worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == (
        "job-cache-0"
    )
    assert (
        leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"]
        == (worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"])
    )
    service = await client.get("v1", "services", "job-cache", namespace="default")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "job-cache"}


async def test_lws_defaults_are_the_api_servers_and_the_controller_runs_on_them(
    client: KubeClient,
) -> None:
    body = cache_lws(size=2)
    del body["spec"]["replicas"]
    stored = await client.create(*LWS, body)
    spec = stored["spec"]
    assert (spec["replicas"], spec["startupPolicy"]) == (1, "LeaderCreated")
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    pods = await eventually(
        lambda: _when(pods_of(client, "job-cache"), lambda p: len(p) == 2), "one group"
    )
    assert sorted(pods) == ["job-cache-0", "job-cache-0-1"]


async def test_available_once_every_pod_is_ready_and_a_restart_recreates_the_group(
    client: KubeClient,
) -> None:
    await client.create(*LWS, cache_lws(size=2))
    pods = await eventually(
        lambda: _when(pods_of(client, "job-cache"), lambda p: len(p) == 2), "two pods"
    )

    async def condition(type_: str) -> str | None:
        lws = await client.get(*LWS, "job-cache", namespace="default")
        for c in lws.get("status", {}).get("conditions", []):
            if c["type"] == type_:
                return str(c["status"])
        return None

    assert await eventually(lambda: condition("Progressing"), "Progressing") == "True"
    await make_ready(client, pods["job-cache-0"])
    assert await condition("Available") != "True"
    await make_ready(client, pods["job-cache-0-1"])
    await eventually(lambda: _eq(condition("Available"), "True"), "Available")
    assert await condition("Progressing") == "False"

    # A worker's container restarts: the whole group goes and comes back as new pods.
    old_uids = {p["metadata"]["uid"] for p in pods.values()}
    await make_ready(client, pods["job-cache-0-1"], restarts=1)
    fresh = await eventually(
        lambda: _when(
            pods_of(client, "job-cache"),
            lambda p: len(p) == 2 and not old_uids & {x["metadata"]["uid"] for x in p.values()},
        ),
        "a recreated group",
    )
    assert sorted(fresh) == ["job-cache-0", "job-cache-0-1"]
    await eventually(lambda: _eq(condition("Available"), "False"), "Available turns False")


async def _when(value: Awaitable[Any], ok: Callable[[Any], bool]) -> Any:
    got = await value
    return got if ok(got) else None


async def _eq(value: Awaitable[Any], want: Any) -> bool:
    return bool(await value == want)


async def test_unique_per_replica_gives_each_group_its_own_service_owned_by_its_leader(
    client: KubeClient,
) -> None:
    body = cache_lws(size=2)
    body["spec"].update(replicas=2, networkConfig={"subdomainPolicy": "UniquePerReplica"})
    await client.create(*LWS, body)
    pods = await eventually(
        lambda: _when(pods_of(client, "job-cache"), lambda p: len(p) == 4), "two groups"
    )

    async def services() -> dict[str, dict[str, Any]]:
        items, _ = await client.list("v1", "services", namespace="default")
        return {
            s["metadata"]["name"]: s
            for s in items
            if s["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name")
        }

    got = await eventually(lambda: _when(services(), lambda s: len(s) == 2), "two Services")
    assert sorted(got) == ["job-cache-0", "job-cache-1"]
    for group in ("0", "1"):
        leader = pods[f"job-cache-{group}"]
        service = got[f"job-cache-{group}"]
        assert service["spec"]["selector"] == {
            "leaderworkerset.sigs.k8s.io/name": "job-cache",
            "leaderworkerset.sigs.k8s.io/group-index": group,
        }
        assert service["metadata"]["ownerReferences"][0]["uid"] == leader["metadata"]["uid"]
        worker_env = pods[f"job-cache-{group}-1"]["spec"]["containers"][0]["env"]
        assert worker_env[0]["value"] == f"job-cache-{group}.job-cache-{group}.default"

    # The leader goes: its Service goes with it and comes back owned by the new leader.
    await client.delete("v1", "pods", "job-cache-0", namespace="default")
    new_leader = await eventually(
        lambda: _when(
            pods_of(client, "job-cache"),
            lambda p: (
                "job-cache-0" in p
                and p["job-cache-0"]["metadata"]["uid"] != pods["job-cache-0"]["metadata"]["uid"]
            ),
        ),
        "a new leader",
    )
    uid = new_leader["job-cache-0"]["metadata"]["uid"]
    await eventually(
        lambda: _when(
            services(),
            lambda s: (
                "job-cache-0" in s
                and s["job-cache-0"]["metadata"]["ownerReferences"][0]["uid"] == uid
            ),
        ),
        "the new leader's Service",
    )
