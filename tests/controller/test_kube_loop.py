"""The controller loop of `kubetrain.kube.loop` that the LeaderWorkerSet, Katib and workload
controllers share: workers start once the informers have listed, a failed reconcile is retried
(and logged as retried or as a crash), a stop ends every task; against a real API server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubetrain.controller import connect
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.informer import Informer, object_key
from kubetrain.kube.kinds import CONFIGMAP
from kubetrain.kube.loop import failure_logger, run_loop
from kubetrain.kube.workqueue import RateLimit, WorkQueue
from kubetrain.local.apiserver import ApiServer

Key = tuple[str, str]


@pytest.mark.parametrize(
    ("err", "level", "text", "traceback"),
    [
        pytest.param(
            ApiError(409, "Conflict", "the object has been modified"),
            logging.INFO,
            "thing ns/a: 409 Conflict: the object has been modified",
            False,
            id="an API error is retried and logged as such",
        ),
        pytest.param(
            ConnectionResetError("reset"),
            logging.INFO,
            "thing ns/a: reset",
            False,
            id="a transport error is retried and logged as such",
        ),
        pytest.param(
            KeyError("spec"),
            logging.ERROR,
            "thing ns/a: reconcile crashed",
            True,
            id="anything else is a crash, logged with its traceback",
        ),
    ],
)
def test_a_failed_reconcile_is_logged_as_retried_or_as_a_crash(
    caplog: pytest.LogCaptureFixture, err: Exception, level: int, text: str, traceback: bool
) -> None:
    log = logging.getLogger("test_kube_loop")
    with caplog.at_level(logging.INFO, logger="test_kube_loop"):
        failure_logger(log, "thing")(("ns", "a"), err)
    [record] = caplog.records
    assert (record.levelno, record.getMessage(), record.exc_info is not None) == (
        level,
        text,
        traceback,
    )


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = ApiServer(tmp_path, in_memory=True)
    await server.start()
    client = connect(server.write_kubeconfig())
    try:
        yield client
    finally:
        await client.close()
        await server.close()


def _configmap(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


async def test_workers_reconcile_after_the_first_list_retry_failures_and_stop(
    kube: KubeClient,
) -> None:
    await kube.create("v1", "configmaps", _configmap("before"))
    informer = Informer(kube, CONFIGMAP, namespace="default")
    queue: WorkQueue[Key] = WorkQueue(RateLimit(base_delay=0.01, max_delay=0.01))
    informer.add_handler(lambda _t, obj: queue.add(object_key(obj)))
    calls: list[str] = []
    failures: list[Key] = []

    async def reconcile(key: Key) -> None:
        # Every reconcile reads a full cache: the informer has listed before any runs.
        assert informer.get("before", "default") is not None
        calls.append(key[1])
        if calls.count("flaky") == 1 and key[1] == "flaky":
            raise ApiError(409, "Conflict", "try again")

    stop, ready = asyncio.Event(), asyncio.Event()
    loop = asyncio.create_task(
        run_loop(
            [informer],
            queue,
            reconcile,
            lambda key, _err: failures.append(key),
            stop,
            concurrency=2,
            ready=ready,
            name="test",
        )
    )
    await asyncio.wait_for(ready.wait(), 10)
    await kube.create("v1", "configmaps", _configmap("flaky"))
    async with asyncio.timeout(10):
        while calls.count("flaky") < 2:
            await asyncio.sleep(0.02)
    assert failures == [("default", "flaky")]
    assert "before" in calls
    stop.set()
    await asyncio.wait_for(loop, 10)
    assert queue.shutting_down
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert not any(n.startswith("test-") for n in names), names


async def test_a_stop_before_the_first_list_starts_no_worker(kube: KubeClient) -> None:
    informer = Informer(kube, CONFIGMAP, namespace="default")
    queue: WorkQueue[Key] = WorkQueue()
    stop, ready = asyncio.Event(), asyncio.Event()
    stop.set()

    async def reconcile(key: Key) -> None:
        raise AssertionError("no worker runs")

    await asyncio.wait_for(
        run_loop(
            [informer],
            queue,
            reconcile,
            lambda *_: None,
            stop,
            concurrency=1,
            ready=ready,
            name="test",
        ),
        10,
    )
    assert not ready.is_set()
    assert queue.shutting_down
