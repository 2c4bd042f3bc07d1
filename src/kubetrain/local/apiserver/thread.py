"""Run an ``ApiServer`` on its own event loop in a background thread, for synchronous callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubetrain.local.apiserver.server import ApiServer

__all__ = ["ServerThread"]


class ServerThread:
    """``with ServerThread(lambda: ApiServer(tmp, in_memory=True)) as server: ...``

    The factory runs inside the thread's loop, so everything the server creates belongs to it.
    ``start()`` returns once the server answers; ``stop()`` closes it (watches first) and joins.
    """

    def __init__(self, factory: Callable[[], ApiServer], start_timeout: float = 30.0) -> None:
        self._factory = factory
        self._timeout = start_timeout
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kubetrain-apiserver", daemon=True)
        self.server: ApiServer | None = None

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            self.server = self._factory()
            await self.server.start()
        except BaseException as exc:
            self._error = exc
            if self.server is not None:
                await self.server.close()  # the store may be open and its writer running
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.close()

    def start(self) -> ApiServer:
        self._thread.start()
        if not self._ready.wait(self._timeout):
            raise TimeoutError("the API server did not start in time")
        if self._error is not None:
            raise RuntimeError(f"the API server failed to start: {self._error}") from self._error
        assert self.server is not None
        return self.server

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def call(self, fn: Callable[[ApiServer], Any]) -> Any:
        """Run ``fn(server)`` (a coroutine function or plain function) on the server's loop; return its result."""
        assert self._loop is not None and self.server is not None
        server = self.server

        async def run() -> Any:
            out = fn(server)
            if asyncio.iscoroutine(out):
                return await out
            return out

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=60)

    def write_kubeconfig(self, path: Path | None = None) -> Path:
        assert self.server is not None
        return self.server.write_kubeconfig(path)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
