"""The loop of an informer-fed controller: informers, then workers over one queue, until stopped.

`run_loop` is what the local engine's small controllers (LeaderWorkerSet, Katib) run: it starts
their informers, waits for every first list (or a stop), runs ``concurrency`` workers over the
queue, sets ``ready``, and on the way out shuts the queue down and ends every task.
`all_synced` is its wait, for loops that start their workers themselves; `failure_logger` is
how a failed reconcile is reported: API and transport errors are retried and logged as such,
anything else is a crash, logged with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar

from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError
from kubetrain.kube.informer import Informer
from kubetrain.kube.workqueue import WorkQueue, work

__all__ = ["RETRIED", "all_synced", "failure_logger", "run_loop"]

K = TypeVar("K", bound=Hashable)

# What a reconcile may meet and simply try again (the queue's backoff): the API refused or was
# not reached.
RETRIED: tuple[type[Exception], ...] = (ApiError, *TRANSPORT_ERRORS)


async def all_synced(informers: Sequence[Informer], stop: asyncio.Event) -> bool:
    """Wait until every informer has listed once; False when ``stop`` is set first."""
    for informer in informers:
        waiter = asyncio.create_task(informer.synced.wait())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        stopper.cancel()
        if stop.is_set():
            return False
    return True


def failure_logger(log: logging.Logger, what: str) -> Callable[[tuple[str, ...], Exception], None]:
    """``work``'s ``failed`` for keys ``(namespace, name, ...)`` of ``what`` objects."""

    def failed(key: tuple[str, ...], err: Exception) -> None:
        if isinstance(err, RETRIED):
            log.info("%s %s: %s", what, "/".join(key), err)
        else:
            log.error("%s %s: reconcile crashed", what, "/".join(key), exc_info=err)

    return failed


async def run_loop(
    informers: Sequence[Informer],
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[float | None]],
    failed: Callable[[K, Exception], None],
    stop: asyncio.Event,
    *,
    concurrency: int,
    ready: asyncio.Event,
    name: str,
) -> None:
    """Run ``informers`` and ``concurrency`` workers (``work``) until ``stop`` is set.

    The workers start once every informer has listed, so a reconcile reads full caches;
    ``ready`` is set then. Tasks are named ``<name>-informer-<Kind>`` and ``<name>-worker-<i>``.
    """
    tasks = [asyncio.create_task(i.run(), name=f"{name}-informer-{i.kind.kind}") for i in informers]
    try:
        if not await all_synced(informers, stop):
            return
        tasks += [
            asyncio.create_task(work(queue, reconcile, failed), name=f"{name}-worker-{i}")
            for i in range(concurrency)
        ]
        ready.set()
        await stop.wait()
    finally:
        queue.shut_down()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
