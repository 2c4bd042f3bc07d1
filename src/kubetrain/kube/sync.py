"""The API client for synchronous code: :class:`KubeClient`'s calls, from any number of threads.

One event loop runs in a daemon thread and owns the client's connection pool; every call is a
coroutine handed to that loop, and streams (watches, logs) are read there and handed over through
a queue. So the SDK and the CLI share the controller's client (auth and its renewal, watch
decoding, explicit patch types) and are safe to use from several threads at once with no lock:
nothing but the loop ever touches the connection pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from kubetrain.kube.client import KubeClient

__all__ = ["SyncKube"]

T = TypeVar("T")
_END = object()


class SyncKube:
    """A :class:`KubeClient` made by ``make`` inside a private event loop thread."""

    def __init__(self, make: Callable[[], KubeClient]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kubetrain-kube", daemon=True
        )
        self._thread.start()
        self._closed = False
        try:
            self.kube = self.call(lambda: _made(make))
        except BaseException:
            self._stop()
            raise

    def call(self, coro: Callable[[], Awaitable[T]]) -> T:
        """Run ``coro()`` on the client's loop and wait for its result (or its exception)."""
        if self._closed:
            raise RuntimeError("the client has been closed")
        return asyncio.run_coroutine_threadsafe(_awaited(coro), self._loop).result()

    def stream(self, agen: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        """The items of the async iterator ``agen()``, read on the loop; closing (or dropping)
        the returned iterator cancels the read."""
        if self._closed:
            raise RuntimeError("the client has been closed")
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()

        async def pump() -> None:
            try:
                async for item in agen():
                    items.put(item)
            except asyncio.CancelledError:
                raise
            except BaseException as err:  # handed to the reader, raised there
                items.put(_Failure(err))
            finally:
                items.put(_END)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop)
        try:
            while True:
                item = items.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            future.cancel()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.kube.close(), self._loop).result(timeout=5)
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _made(make: Callable[[], KubeClient]) -> KubeClient:
    return make()


async def _awaited(coro: Callable[[], Awaitable[T]]) -> T:
    return await coro()
