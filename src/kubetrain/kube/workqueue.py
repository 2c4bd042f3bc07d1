"""A de-duplicating, rate-limited work queue of reconcile keys.

Semantics follow the queue every Kubernetes controller relies on:
- a key waiting in the queue is held once however often it is added;
- a key being processed is never handed to a second worker; adding it meanwhile marks it dirty
  and it is queued again when the worker calls ``done``;
- ``add_after`` keeps only the earliest pending time per key;
- ``add_rate_limited`` waits ``max(per-key exponential backoff, overall token bucket)``, and
  ``forget`` resets the key's failure count after a success.

``work`` is one worker over such a queue, for loops that need nothing more around a reconcile.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["QueueShutDown", "RateLimit", "WorkQueue", "work"]

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """``get`` on a queue that was shut down."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Per-key backoff ``base * 2**failures`` capped at ``max_delay``, and an overall bucket.

    The defaults are controller-runtime's (5 ms .. 1000 s per key, 10 per second with a burst of
    100 overall).
    """

    base_delay: float = 0.005
    max_delay: float = 1000.0
    qps: float = 10.0
    burst: int = 100

    def delay(self, failures: int) -> float:
        """The per-key wait after ``failures`` earlier failures of that key."""
        return min(self.max_delay, self.base_delay * float(2 ** min(failures, 64)))


class _TokenBucket:
    """Hands out the time each next token becomes available; never blocks by itself."""

    def __init__(self, qps: float, burst: int) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()

    def reserve(self) -> float:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps


class WorkQueue(Generic[K]):
    def __init__(self, rate_limit: RateLimit | None = None) -> None:
        self._limit = rate_limit or RateLimit()
        self._bucket = _TokenBucket(self._limit.qps, self._limit.burst)
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        # Set whenever a key may be available; every waiting worker wakes and re-checks.
        self._ready = asyncio.Event()
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def waiting(self) -> int:
        """Keys scheduled for later (``add_after`` / ``add_rate_limited``)."""
        return len(self._waiting)

    @property
    def shutting_down(self) -> bool:
        return self._shutdown

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._wake()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._waiting[key] = (when, loop.call_at(when, self._fire, key))

    def add_rate_limited(self, key: K) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, max(self._limit.delay(failures), self._bucket.reserve()))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key; the caller owns it until ``done(key)``. After ``shut_down`` no key is
        handed out any more (keys in workers' hands are still finished)."""
        while not self._queue or self._shutdown:
            if self._shutdown:
                raise QueueShutDown
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._wake()

    def shut_down(self) -> None:
        self._shutdown = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._wake()

    def _fire(self, key: K) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def _wake(self) -> None:
        self._ready.set()


async def work(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[float | None]],
    failed: Callable[[K, Exception], None],
) -> None:
    """Reconcile the keys ``queue`` hands out until it shuts down.

    A reconcile that raises is reported to ``failed`` and its key retried rate-limited; one that
    succeeds resets the key's backoff and, when it answers a delay, runs again after it.
    """
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            again = await reconcile(key)
        except Exception as err:
            failed(key, err)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            if again is not None:
                queue.add_after(key, again)
        finally:
            queue.done(key)
