"""A lean HTTP/1.1 client for the API client's plain requests: keep-alive connections straight
on the event loop's transports, answers parsed by httptools (llhttp, the parser of Node.js).

Why not aiohttp for these: a controller's work is thousands of small requests, and aiohttp's
client spends most of its CPU per request around the exchange (request and response objects,
URL objects, header multidicts, a timer rescheduled on every read), several times what the
exchange itself costs. Here a request is one ``write`` of prebuilt bytes and one parse of the
answer. Watches and logs (streams) stay on aiohttp, as does everything behind a proxy.

Semantics kept from aiohttp's client as the API client used it: at most ``limit`` connections,
idle ones reused (a closed one is never handed out), ``timeout`` bounds connecting and each
silence while an answer is awaited, and every transport failure is an ``OSError``
(``ConnectionError``, ``TimeoutError``, ``ssl.SSLError``). A request whose reused connection
closes before any byte of the answer came is sent again once on a new connection when it is
idempotent, as Go's transport does for a connection the server closed while idle.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

import httptools

__all__ = ["Answer", "Pool"]

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# What a path may hold unescaped (RFC 3986 pchar and "/"); names of Kubernetes objects always do.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str | None
    body: bytes


class _Reused(ConnectionError):
    """The answer never started on a connection that had served before (closed while idle)."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: list[bytes] = []
        self._reason: str | None = None
        self._heard = False  # any byte of the current answer arrived
        self._status = 0
        self._keep_alive = False
        self._last_heard = 0.0
        self.served = 0  # answers completed on this connection
        self.closed = False

    # --- protocol callbacks -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def data_received(self, data: bytes) -> None:
        self._heard = True
        self._last_heard = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(ConnectionError(f"unreadable HTTP answer: {err}"))
            self.close()

    def eof_received(self) -> bool | None:
        return False  # close: a server that stops sending ends the connection

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._heard or not self.served:
            error: ConnectionError = ConnectionResetError(
                "the server closed the connection" + (f": {exc}" if exc else "")
            )
        else:
            error = _Reused("the server closed the idle connection")
        self._fail(error)

    # --- parser callbacks (httptools) -------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._reason = status.decode("latin-1") or None

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        # Read here: once the callback returns, the parser is reset for the next answer.
        self._status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- use ------------------------------------------------------------------------------

    def _fail(self, error: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    async def exchange(self, request: bytes, timeout: float) -> Answer:
        """Send ``request`` and wait for its whole answer; ``timeout``: the longest silence."""
        assert self.transport is not None
        self._chunks = []
        self._reason = None
        self._heard = False
        waiter = self._waiter = self._loop.create_future()
        self._last_heard = self._loop.time()
        timer = self._loop.call_at(self._last_heard + timeout, self._check_silence, timeout)
        try:
            self.transport.write(request)
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        self.served += 1
        if not self._keep_alive:
            self.close()
        body = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        return Answer(self._status, self._reason, body)

    def _check_silence(self, timeout: float) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        quiet_until = self._last_heard + timeout
        if self._loop.time() < quiet_until:
            # Data came meanwhile: wait for the rest of the silence from the last byte.
            self._loop.call_at(quiet_until, self._check_silence, timeout)
            return
        waiter.set_exception(TimeoutError(f"no answer for {timeout:g} s"))
        self.abort()


class Pool:
    """Keep-alive connections to one server (``https`` with ``tls``, or ``http``), made in the
    event loop of the first request."""

    def __init__(self, server: str, tls: ssl.SSLContext | None, *, timeout: float,
                 limit: int = 64, user_agent: str = "kubetrain") -> None:  # fmt: skip
        parts = urllib.parse.urlsplit(server)
        self._secure = parts.scheme == "https"
        self._tls = tls if self._secure else None
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._secure else 80)
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc
        self._user_agent = user_agent
        self.timeout = timeout
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None
        self._limit = limit
        self._closed = False
        self._all: set[_Connection] = set()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        content: bytes | None,
    ) -> Answer:
        if self._closed:
            raise RuntimeError("the client has been closed")
        message = self._message(method, path, params, headers, content)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        async with self._slots:
            for attempt in (1, 2):
                conn = await self._connection()
                try:
                    answer = await conn.exchange(message, self.timeout)
                except _Reused:
                    self._all.discard(conn)
                    if attempt == 2 or method not in _IDEMPOTENT:
                        raise
                    continue
                except BaseException:
                    # Cancelled or failed mid-answer: the connection's state is unknown.
                    conn.abort()
                    self._all.discard(conn)
                    raise
                if conn.closed:
                    self._all.discard(conn)
                else:
                    self._idle.append(conn)
                return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            self._all.discard(conn)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop), self._host, self._port,
                    ssl=self._tls, server_hostname=self._host if self._tls else None,
                )  # fmt: skip
        except TimeoutError:
            raise TimeoutError(
                f"connecting to {self._host}:{self._port} took over {self.timeout:g} s"
            ) from None
        self._all.add(conn)
        return conn

    def _message(
        self,
        method: str,
        path: str,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        content: bytes | None,
    ) -> bytes:
        target = urllib.parse.quote(self._prefix + path, safe=_PATH_SAFE)
        if params:
            target += "?" + urllib.parse.urlencode(params)
        lines = [
            f"{method} {target} HTTP/1.1",
            f"Host: {self._host_header}",
            f"User-Agent: {self._user_agent}",
        ]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if content is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(content or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + content if content else head

    async def close(self) -> None:
        self._closed = True
        conns, self._all, self._idle = self._all, set(), []
        for conn in conns:
            conn.close()
        # Let the transports finish their TLS close before the loop may stop.
        await asyncio.sleep(0)
