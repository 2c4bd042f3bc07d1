"""Restarts, reconnects and leadership: the controller converges whatever happens to it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator

import pytest
from controller_plane import FAST, JOBSETS, TRAINJOBS, Plane, PrivateServer, condition, eventually

from kubetrain.api.types import Obj
from kubetrain.controller import Controller, KubeClient, LeaderElector, LeadershipLost, connect

N_JOBS = 24


async def _jobsets(plane: Plane) -> list[Obj]:
    items, _ = await plane.kube.list(*JOBSETS, namespace=plane.namespace)
    return items


async def test_a_controller_restarted_midway_converges_with_one_jobset_per_trainjob(
    plane: Plane,
) -> None:
    jobs = {}
    for i in range(N_JOBS):
        job = await plane.create_trainjob(f"tj-{i}")
        jobs[job["metadata"]["name"]] = job["metadata"]["uid"]
    first = await plane.start_controller(concurrency=2)

    async def some_done() -> bool:
        return len(await _jobsets(plane)) >= 3

    await eventually(some_done, what="a few JobSets")
    await plane.stop_controller(first)  # mid-way: most jobs are not reconciled yet
    before = {js["metadata"]["name"]: js["metadata"]["uid"] for js in await _jobsets(plane)}
    await plane.start_controller(concurrency=4)

    async def all_done() -> list[Obj] | None:
        items = await _jobsets(plane)
        return items if len(items) >= N_JOBS else None

    jobsets = await eventually(all_done, what="every JobSet")
    await asyncio.sleep(0.3)
    jobsets = await _jobsets(plane)
    owners = sorted(
        (js["metadata"]["name"], js["metadata"]["ownerReferences"][0]["uid"]) for js in jobsets
    )
    assert owners == sorted(jobs.items()), "exactly one JobSet per TrainJob, owned by it"
    configmaps, _ = await plane.kube.list("v1", "configmaps", namespace=plane.namespace)
    snapshots = [c for c in configmaps if c["metadata"]["name"].endswith("-runtime-snapshot")]
    assert len(snapshots) == N_JOBS
    uids = {js["metadata"]["name"]: js["metadata"]["uid"] for js in jobsets}
    assert {name: uids[name] for name in before} == before, "no JobSet made twice"


async def test_the_controller_reconnects_after_the_api_server_restarts(
    private_server: PrivateServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    server = await private_server.start()
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    kube = connect(kubeconfig)
    controller = Controller(connect(kubeconfig), rate_limit=FAST, watch_timeout=30)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        await asyncio.wait_for(controller.ready.wait(), 10)
        plane = Plane(kubeconfig, "default", kube)
        await plane.create_trainjob("before")
        await eventually(lambda: plane.get(JOBSETS, "before"), what="the first JobSet")

        await private_server.stop()
        await asyncio.sleep(0.3)  # the controller sees its watches break and retries
        await private_server.start()

        await plane.create_trainjob("after")
        await eventually(
            lambda: plane.get(JOBSETS, "after"), timeout=15, what="a JobSet after the restart"
        )
        await plane.set_jobset_status(
            "before",
            {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                             "message": "done", "lastTransitionTime": "2026-11-29T09:00:00Z"}]},
        )  # fmt: skip

        async def complete() -> Obj | None:
            return condition(await plane.trainjob_status("before"), "Complete")

        await eventually(complete, timeout=15, what="status of a job from before the restart")
        assert controller.caches.trainjobs.watches >= 2
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await controller.client.close()
        await kube.close()


def _elector(client: KubeClient, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(
        client,
        namespace=namespace,
        name="trainer-test",
        identity=identity,
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.2,
    )


@pytest.fixture
def collect_after_the_loop() -> Iterator[None]:
    """A death can cut a TLS connection between its TCP connect and its handshake: asyncio
    (CPython 3.11) then never closes the socket, the loop's selector holds it until the loop
    closes (a dead process loses it anyway). Collected once this test's loop is gone, so the
    ResourceWarning is this test's (ignored) and not a later one's."""
    yield
    gc.collect()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_only_the_leader_reconciles_and_a_follower_takes_over_when_it_dies(
    collect_after_the_loop: None, plane: Plane
) -> None:
    client_a, client_b = connect(plane.kubeconfig), connect(plane.kubeconfig)
    first = await plane.start_controller(client_a, leader=_elector(client_a, plane.namespace, "a"))
    second_ctl = Controller(
        client_b, namespace=plane.namespace, rate_limit=FAST,
        leader=_elector(client_b, plane.namespace, "b"),
    )  # fmt: skip
    second_stop = asyncio.Event()
    second = asyncio.create_task(second_ctl.run(second_stop))
    try:
        await plane.create_trainjob("one")
        await eventually(lambda: plane.get(JOBSETS, "one"), what="the leader's JobSet")
        await asyncio.sleep(0.3)
        assert first.metrics.total("TrainJob") >= 1
        assert second_ctl.metrics.total() == 0, "a follower must not reconcile"
        assert not second_ctl.ready.is_set()

        # The leader dies without releasing its Lease (no stop event: its task is cancelled).
        entry = next(e for e in plane.controllers if e[0] is first)
        plane.controllers.remove(entry)
        leader_task = entry[2]
        del entry
        leader_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leader_task
        del leader_task
        await first.client.close()

        await plane.create_trainjob("two")
        await eventually(
            lambda: plane.get(JOBSETS, "two"), timeout=10, what="the new leader's JobSet"
        )
        assert second_ctl.ready.is_set()
        lease = await plane.kube.get(
            "coordination.k8s.io/v1", "leases", "trainer-test", namespace=plane.namespace
        )
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
        assert len(await _jobsets(plane)) == 2
    finally:
        second_stop.set()
        await asyncio.wait_for(second, 10)
        await second_ctl.client.close()


async def test_a_leader_that_stops_hands_the_lease_over_at_once(plane: Plane) -> None:
    clients = [connect(plane.kubeconfig), connect(plane.kubeconfig)]
    a = _elector(clients[0], plane.namespace, "a")
    b = _elector(clients[1], plane.namespace, "b")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    try:
        assert await a.acquire(stop_a)
        holding = asyncio.create_task(a.hold(stop_a))
        b_wins = asyncio.create_task(b.acquire(stop_b))
        await asyncio.sleep(0.5)
        assert not b_wins.done(), "the Lease is held and renewed"
        stop_a.set()
        await holding
        assert await asyncio.wait_for(b_wins, 2.0), (
            "a released Lease is taken without waiting it out"
        )
    finally:
        stop_a.set()
        stop_b.set()
        for client in clients:
            await client.close()


async def test_the_legacy_runtime_finalizer_is_removed(plane: Plane, torch_runtime: Obj) -> None:
    await plane.start_controller()
    runtime = {
        **torch_runtime,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "old",
            "namespace": plane.namespace,
            "finalizers": ["trainer.kubeflow.org/resource-in-use", "example.com/keep"],
        },
    }
    await plane.kube.create("trainer.kubeflow.org/v1alpha1", "trainingruntimes", runtime)

    async def stripped() -> list[str] | None:
        obj = await plane.get(("trainer.kubeflow.org/v1alpha1", "trainingruntimes"), "old")
        finalizers: list[str] = (obj or {}).get("metadata", {}).get("finalizers") or []
        return finalizers if "trainer.kubeflow.org/resource-in-use" not in finalizers else None

    assert await eventually(stripped, what="the legacy finalizer removed") == ["example.com/keep"]


async def test_repeated_events_are_counted_not_duplicated(plane: Plane) -> None:
    controller = await plane.start_controller()
    job = await plane.create_trainjob("tj")
    for _ in range(3):
        controller.events.record(job, "Warning", "Repeated", "same note")
    await controller.events.flush()
    events = [e for e in await plane.events("tj") if e["reason"] == "Repeated"]
    assert len(events) == 1
    assert events[0]["count"] == 3
    assert events[0]["firstTimestamp"] <= events[0]["lastTimestamp"]
    assert events[0]["involvedObject"]["uid"] == job["metadata"]["uid"]


async def test_trainjobs_in_other_namespaces_are_not_touched(plane: Plane) -> None:
    await plane.start_controller()
    other = f"{plane.namespace}-x"
    await plane.kube.create(
        "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}
    )
    body = plane.trainjob("elsewhere")
    body["metadata"]["namespace"] = other
    await plane.kube.create(*TRAINJOBS, body)
    await plane.create_trainjob("here")
    await eventually(lambda: plane.get(JOBSETS, "here"), what="our JobSet")
    items, _ = await plane.kube.list(*JOBSETS, namespace=other)
    assert items == []


async def test_watches_that_the_server_ends_are_resumed(plane: Plane) -> None:
    controller = await plane.start_controller(watch_timeout=1)
    await asyncio.sleep(2.5)  # every watch has been ended by the server at least twice
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    assert controller.caches.trainjobs.watches >= 3
    assert controller.caches.trainjobs.lists == 1, "an ended watch resumes; it does not relist"


async def test_a_leader_whose_lease_is_taken_stops_reconciling(plane: Plane) -> None:
    client = connect(plane.kubeconfig)
    controller = Controller(
        client, namespace=plane.namespace, rate_limit=FAST,
        leader=_elector(client, plane.namespace, "a"),
    )  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        await asyncio.wait_for(controller.ready.wait(), 10)
        lease = await plane.kube.get(
            "coordination.k8s.io/v1", "leases", "trainer-test", namespace=plane.namespace
        )
        # Someone else holds the Lease now (and keeps renewing it for longer than we wait).
        lease["spec"] = {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 60}
        await plane.kube.replace("coordination.k8s.io/v1", "leases", lease)
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(task, 5)
        assert not controller.ready.is_set()
    finally:
        stop.set()
        if not task.done():
            await asyncio.wait_for(task, 10)
        await client.close()
