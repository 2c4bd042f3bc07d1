"""The work queue: de-duplication, one worker per key, delays and backoff."""

from __future__ import annotations

import asyncio

import pytest

from kubetrain.kube.workqueue import QueueShutDown, RateLimit, WorkQueue, work


async def drain(q: WorkQueue[str]) -> list[str]:
    out = []
    while len(q):
        key = await q.get()
        out.append(key)
        q.done(key)
    return out


async def test_a_key_added_twice_is_handed_out_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a"):
        q.add(key)
    assert await drain(q) == ["a", "b"]


async def test_a_key_added_while_processing_comes_back_after_done_not_before() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    assert len(q) == 0, "a key in a worker's hands must not reach a second worker"
    q.done(key)
    assert await drain(q) == ["a"]


async def test_workers_never_hold_the_same_key_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    held: set[str] = set()
    overlaps = 0

    async def worker() -> None:
        nonlocal overlaps
        while True:
            try:
                key = await q.get()
            except QueueShutDown:
                return
            if key in held:
                overlaps += 1
            held.add(key)
            await asyncio.sleep(0.001)
            held.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(200):
        q.add(f"k{i % 3}")
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)
    q.shut_down()
    await asyncio.gather(*workers)
    assert overlaps == 0


async def test_add_after_keeps_the_earliest_time() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 10.0)
    q.add_after("a", 0.01)
    q.add_after("a", 5.0)
    assert q.waiting == 1
    key = await asyncio.wait_for(q.get(), 1.0)
    assert key == "a"


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.01), (1, 0.02), (3, 0.08), (20, 0.5)],
    ids=[
        "first failure waits the base delay",
        "second failure doubles it",
        "fourth failure waits eight times the base",
        "many failures are capped at the maximum",
    ],
)
def test_rate_limited_backoff_grows_per_key(failures: int, expected: float) -> None:
    assert RateLimit(base_delay=0.01, max_delay=0.5).delay(failures) == pytest.approx(expected)


async def test_a_rate_limited_key_waits_its_backoff() -> None:
    q: WorkQueue[str] = WorkQueue(RateLimit(base_delay=0.02, qps=1000, burst=1000))
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_rate_limited("a")
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1.0) == "a"
    assert loop.time() - start >= 0.015


async def test_forget_resets_the_backoff() -> None:
    q: WorkQueue[str] = WorkQueue(RateLimit(base_delay=0.01, qps=1000, burst=1000))
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    assert q.failures("a") == 2
    q.forget("a")
    assert q.failures("a") == 0
    q.shut_down()


async def test_overall_bucket_spaces_out_a_burst() -> None:
    q: WorkQueue[str] = WorkQueue(RateLimit(base_delay=0.0, qps=100, burst=2))
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(6):
        q.add_rate_limited(f"k{i}")
    got = [await asyncio.wait_for(q.get(), 1.0) for _ in range(6)]
    assert sorted(got) == [f"k{i}" for i in range(6)]
    # 2 free tokens, then 4 more at 100/s: at least ~30 ms.
    assert loop.time() - start >= 0.03


async def test_get_on_a_shut_down_queue_raises() -> None:
    q: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await waiter


async def test_a_worker_retries_a_failure_then_runs_again_when_asked_and_stops_at_shut_down() -> (
    None
):
    q: WorkQueue[str] = WorkQueue(RateLimit(base_delay=0.001, qps=1000, burst=1000))
    seen: list[str] = []
    failures: list[str] = []

    async def reconcile(key: str) -> float | None:
        seen.append(key)
        if len(seen) == 1:
            raise RuntimeError("the API server went away")
        if len(seen) == 2:
            assert q.failures(key) == 1, "a failure is retried rate-limited"
            return 0.001  # look again later
        q.shut_down()
        return None

    q.add("a")
    await asyncio.wait_for(work(q, reconcile, lambda k, err: failures.append(f"{k}: {err}")), 1.0)
    assert seen == ["a", "a", "a"]
    assert failures == ["a: the API server went away"]
    assert q.failures("a") == 0, "a success forgets the key's failures"
