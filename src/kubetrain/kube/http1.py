"""Lean HTTP/1.1 over the event loop's transports, messages parsed by httptools (llhttp, the
parser of Node.js): the API client's requests and streams and the embedded API server's
admission webhook calls (``Pool``), and the admission webhook server (``Server``).

Why not aiohttp for these: a controller's work is thousands of small requests, and aiohttp's
client spends most of its CPU per request around the exchange (request and response objects,
URL objects, header multidicts, a timer rescheduled on every read), several times what the
exchange itself costs. Here a request is one ``write`` of prebuilt bytes and one parse of the
answer; a stream (watch, log) gets a connection of its own, read as its chunks come. Only a
server behind a proxy is still reached through aiohttp (``kube.client``).

Semantics kept from aiohttp's client as the API client used it: at most ``limit`` connections,
idle ones reused (a closed one is never handed out), ``timeout`` bounds connecting and each
silence while an answer is awaited, and every transport failure is an ``OSError``
(``ConnectionError``, ``TimeoutError``, ``ssl.SSLError``). A request whose reused connection
closes before any byte of the answer came is sent again once on a new connection when it is
idempotent (or its caller says it may be sent twice, as the API server says of an admission
review), as Go's transport does for a connection the server closed while idle. A connection that
cannot be made is a ``ConnectError`` naming the address; an answer past ``max_answer`` bytes is
an ``AnswerTooLarge``.

The server answers each request whole (read whole, up to a size limit), in order, keeps
connections alive (closing one idle for ``keepalive_timeout``, aiohttp's 75 s) and answers
``Expect: 100-continue``. It stops as Go's ``http.Server.Shutdown`` does (controller-runtime's
webhook server on SIGTERM): no new connections, idle ones closed, requests already received
answered (then their connections closed), all within a grace period. For the same reason as
above: an admission review through aiohttp's server costs more CPU in the framework than in
the review.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

import httptools

__all__ = [
    "KEEPALIVE_TIMEOUT_S",
    "Answer",
    "AnswerTooLarge",
    "ConnectError",
    "Handler",
    "IdleClose",
    "Pool",
    "Request",
    "Response",
    "Server",
    "Stream",
]

log = logging.getLogger(__name__)

# How long a server keeps an idle connection open: aiohttp's server's.
KEEPALIVE_TIMEOUT_S = 75.0
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


# Bytes of a streamed answer held unread before the socket stops being read: a watch or log
# whose reader falls behind then backs up to the server instead of filling this process.
STREAM_HIGH_WATER = 1 << 20


class ConnectError(OSError):
    """No connection to ``host:port``: ``os_error`` says why (refused, unreachable, ...)."""

    def __init__(self, host: str, port: int, os_error: OSError) -> None:
        super().__init__(f"cannot connect to {host}:{port}: {os_error}")
        self.host = host
        self.port = port
        self.os_error = os_error


class AnswerTooLarge(ConnectionError):
    """The answer's body went past the pool's ``max_answer``; the connection was dropped."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_answer: int | None = None) -> None:
        self._loop = loop
        self._max_answer = max_answer
        self._size = 0
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
        # A streamed answer (``open_stream``): its head is in, it ended, or it broke.
        self._streaming = False
        self._head = False
        self._ended = False
        self._error: Exception | None = None
        self._unread = 0  # bytes of a streamed answer in ``_chunks``
        self._paused = False

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

    def on_headers_complete(self) -> None:
        if self._streaming:
            self._status = self._parser.get_status_code()
            self._head = True
            self._wake()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        if self._max_answer is not None:
            self._size += len(body)
            if self._size > self._max_answer:
                self._chunks = []
                self._fail(AnswerTooLarge(f"the answer is over {self._max_answer} bytes"))
                self.abort()
                return
        if self._streaming:
            self._unread += len(body)
            if self._unread > STREAM_HIGH_WATER and not self._paused and self.transport:
                self.transport.pause_reading()
                self._paused = True
            self._wake()

    def on_message_complete(self) -> None:
        # Read here: once the callback returns, the parser is reset for the next answer.
        self._status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()
        self._ended = True
        self._wake()

    # --- use ------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
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
        self._size = 0
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

    async def open_stream(self, request: bytes, timeout: float) -> tuple[int, str | None]:
        """Send ``request`` and wait for the head of its answer; its body comes by ``read``."""
        assert self.transport is not None
        self._streaming = True
        self.transport.write(request)
        while not self._head and not self._ended:
            await self._wait(timeout)
        return self._status, self._reason

    async def read(self, timeout: float | None) -> bytes | None:
        """The body of a streamed answer as it comes, None at its end; ``timeout``: the
        longest silence (None: wait for ever)."""
        while not self._chunks:
            if self._ended:
                return None
            await self._wait(timeout)
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        self._unread = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def _wait(self, timeout: float | None) -> None:
        if self._error is not None:
            raise self._error
        waiter = self._waiter = self._loop.create_future()
        timer = None
        if timeout is not None:
            self._last_heard = self._loop.time()
            timer = self._loop.call_at(self._last_heard + timeout, self._check_silence, timeout)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiter = None

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


class Stream:
    """The answer of ``Pool.stream``: its status now, its body as it comes."""

    def __init__(
        self, status: int, reason: str | None, conn: _Connection, read_timeout: float | None
    ) -> None:
        self.status = status
        self.reason = reason
        self._conn = conn
        self._timeout = read_timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        while (data := await self._conn.read(self._timeout)) is not None:
            yield data

    async def read_all(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


class Pool:
    """Keep-alive connections to one server (``https`` with ``tls``, or ``http``), made in the
    event loop of the first request. ``server_hostname``: the name the server's certificate is
    verified against when it is not the address's host (a Service's DNS name in front of a pod
    IP); ``max_answer``: the most bytes of an answer's body read (None: no limit)."""

    def __init__(self, server: str, tls: ssl.SSLContext | None, *, timeout: float,
                 limit: int = 64, user_agent: str = "kubetrain", server_hostname: str | None = None,
                 max_answer: int | None = None) -> None:  # fmt: skip
        parts = urllib.parse.urlsplit(server)
        self._secure = parts.scheme == "https"
        self._tls = tls if self._secure else None
        self._host = parts.hostname or "localhost"
        self._server_hostname = (server_hostname or self._host) if self._tls else None
        self._max_answer = max_answer
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
        resendable: bool | None = None,
    ) -> Answer:
        """The whole answer. ``resendable``: whether the request may be sent again on a reused
        connection that closed before answering (None: when its method is idempotent)."""
        if self._closed:
            raise RuntimeError("the client has been closed")
        message = self._message(method, path, params, headers, content)
        if resendable is None:
            resendable = method in _IDEMPOTENT
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        async with self._slots:
            for attempt in (1, 2):
                conn = await self._connection()
                try:
                    answer = await conn.exchange(message, self.timeout)
                except _Reused:
                    self._all.discard(conn)
                    if attempt == 2 or not resendable:
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

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> AsyncIterator[Stream]:
        """A request whose answer is read as it comes (watches, logs), on a connection of its
        own that is closed after it (outside the pool's ``limit``)."""
        if self._closed:
            raise RuntimeError("the client has been closed")
        conn = await self._connect()
        try:
            message = self._message(method, path, params, headers, None)
            status, reason = await conn.open_stream(message, self.timeout)
            yield Stream(status, reason, conn, read_timeout)
        finally:
            conn.abort()  # the answer may be unread; nothing reuses this connection
            self._all.discard(conn)

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            self._all.discard(conn)
        return await self._connect()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop, self._max_answer), self._host, self._port,
                    ssl=self._tls, server_hostname=self._server_hostname,
                )  # fmt: skip
        except TimeoutError:
            raise TimeoutError(
                f"connecting to {self._host}:{self._port} took over {self.timeout:g} s"
            ) from None
        except ssl.SSLError:
            raise  # the handshake failed: the caller tells a certificate it does not trust
        except OSError as err:
            raise ConnectError(self._host, self._port, err) from err
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
            # At once, without TLS's closing exchange: that needs loop turns, and a loop that
            # stops first would leave the socket to the garbage collector.
            conn.abort()


# --- the server side ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"


Handler = Callable[[Request], Awaitable[Response]]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Request Entity Too Large", 415: "Unsupported Media Type",
            500: "Internal Server Error"}  # fmt: skip


def _head(status: int, content_type: str, length: int, close: bool) -> bytes:
    reason = _REASONS.get(status, "Unknown")
    extra = "Connection: close\r\n" if close else ""
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode("latin-1")


class IdleClose:
    """Closes a kept-alive server connection idle for ``timeout`` seconds (aiohttp's 75 s):
    ``touch`` on every read and answer; ``busy`` says a request is still open."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.BaseTransport,
        timeout: float,
        busy: Callable[[], bool],
    ) -> None:
        self._loop = loop
        self._transport = transport
        self._timeout = timeout
        self._busy = busy
        self._last_active = loop.time()
        self._timer: asyncio.TimerHandle | None = loop.call_later(timeout, self._check)

    def touch(self) -> None:
        self._last_active = self._loop.time()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self._transport.is_closing():
            return
        idle_until = self._last_active + self._timeout
        if not self._busy() and self._loop.time() >= idle_until:
            self._transport.close()
            return
        self._timer = self._loop.call_at(max(idle_until, self._loop.time() + 1.0), self._check)


class _Serving(asyncio.Protocol):
    """One server-side connection: requests are answered one after another, in order."""

    def __init__(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._loop = loop
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._too_large = False
        self._pending: list[tuple[Request, bool, bool]] = []  # (request, keep-alive, too large)
        self._task: asyncio.Task[None] | None = None
        self._opened = self._loop.time()
        self._requests = 0  # begun on this connection
        self._receiving = False  # a request's bytes are arriving
        self._idle: IdleClose | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self._server.connections.add(self)
        self._idle = IdleClose(
            self._loop, transport, self._server.keepalive_timeout, lambda: self._task is not None
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        if self._idle is not None:
            self._idle.cancel()
        if self._task is not None:
            self._task.cancel()

    def data_received(self, data: bytes) -> None:
        if self._idle is not None:
            self._idle.touch()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reply_and_close(400, b"upgrades are not served")
        except httptools.HttpParserError as err:
            self._reply_and_close(400, f"malformed request: {err}".encode())

    # --- parser callbacks (httptools) -------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body, self._size = b"", {}, [], 0
        self._too_large = False
        self._requests += 1
        self._receiving = True

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._server.max_body:
            self._too_large = True
            self._body = []
        elif not self._too_large:
            self._body.append(body)

    def on_message_complete(self) -> None:
        path = httptools.parse_url(self._url).path.decode("latin-1")
        request = Request(
            self._parser.get_method().decode("latin-1"),
            urllib.parse.unquote(path),
            self._headers,
            b"" if self._too_large else b"".join(self._body),
        )
        # A body past the limit was not kept: answer 413 and close, as the rest may be unread.
        keep_alive = self._parser.should_keep_alive() and not self._too_large
        self._receiving = False
        self._pending.append((request, keep_alive, self._too_large))
        if self._task is None:
            self._task = self._loop.create_task(self._answer_all())

    # --- answering --------------------------------------------------------------------------

    async def _answer_all(self) -> None:
        try:
            while self._pending and self.transport is not None:
                request, keep_alive, too_large = self._pending.pop(0)
                if too_large:
                    response = Response(413, b"request body too large", "text/plain")
                else:
                    try:
                        response = await self._server.handler(request)
                    except Exception:
                        log.exception("answering %s %s", request.method, request.path)
                        response = Response(500, b"internal error", "text/plain")
                close = not keep_alive or self._server.stopping
                self.transport.write(
                    _head(response.status, response.content_type, len(response.body), close)
                    + response.body
                )
                if self._idle is not None:
                    self._idle.touch()
                if close:
                    self.transport.close()
                    return
        finally:
            self._task = None

    def _reply_and_close(self, status: int, text: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_head(status, "text/plain", len(text), True) + text)
            self.transport.close()

    @property
    def busy(self) -> bool:
        """A request is arriving, being answered or waiting its turn; or the connection is new
        and has sent nothing yet, for up to 5 s (what Go's ``Shutdown`` grants such a one)."""
        if self._task is not None or self._pending or self._receiving:
            return True
        return not self._requests and self._loop.time() - self._opened < 5.0

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class Server:
    """An HTTP/1.1 server for small request/answer exchanges (admission reviews): every request
    is read whole (up to ``max_body`` bytes, else 413) and handed to ``handler``."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body: int = 8 * 1024 * 1024,
        keepalive_timeout: float = KEEPALIVE_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.max_body = max_body
        self.keepalive_timeout = keepalive_timeout
        self.connections: set[_Serving] = set()
        self.stopping = False
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None) -> int:
        """Listen on ``host:port`` (0 picks a free port); returns the port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Serving(self, loop), host, port, ssl=tls, reuse_address=True
        )
        sockets = self._server.sockets or ()
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self, grace: float = 0.0) -> None:
        """Stop listening; answer the requests already received for up to ``grace`` seconds
        (each connection closed once answered, idle ones at once), then drop what is left."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        self.stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.connections and loop.time() < deadline:
            for conn in list(self.connections):
                if not conn.busy:
                    conn.close()
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            conn.abort()  # as Pool.close: a stopping loop must not be left a TLS close to finish
        await server.wait_closed()
