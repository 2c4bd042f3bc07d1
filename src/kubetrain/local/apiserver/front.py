"""The API server's connections: plain requests answered from the parsed bytes, streams handed
to aiohttp.

Why: a controller's work is thousands of small requests, and for each one aiohttp's server
spends a good part of the API server's one busy core around the answer rather than on it
(request and response objects, the handler task, header multidicts, the writer). Profiled at
5,000 TrainJobs with RBAC and webhooks: about a quarter of the event loop's thread.

Every connection starts here. A request's head is parsed with httptools (llhttp); one that
streams or upgrades (a watch, a log, exec, attach, port-forward, anything with ``Upgrade``),
goes to an extra route (TokenRequest, the reviews), uses a method other than GET, POST, PUT,
PATCH and DELETE, or has a body too large or chunked, is handed with its bytes so far to
aiohttp's protocol on the same transport, which keeps the connection from then on. Every other
request is read whole and answered by the same ``HttpApi`` middleware and dispatch that aiohttp
would call, with the same ``web.Response``: what is answered does not change, only the
framework around it. As with aiohttp's ``handler_cancellation``, a request whose client goes
away is cancelled, and an idle kept-alive connection is closed after 75 s.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import urllib.parse
from collections.abc import Callable
from email.utils import formatdate
from typing import Any, cast

import httptools
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from kubetrain.kube.http1 import KEEPALIVE_TIMEOUT_S, IdleClose
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.http import MAX_BODY_BYTES, HttpApi, error_response

__all__ = ["Front", "LeanRequest"]

log = logging.getLogger(__name__)

_LEAN_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
# Last path segments whose answers stream (pods/log, exec, attach, portforward; proxies).
_STREAMED = frozenset({"log", "exec", "attach", "portforward", "proxy"})


class LeanRequest(dict[str, Any]):
    """What ``HttpApi`` reads of a ``web.Request``: method, path, query, headers, body, and
    the per-request values it stores (the authenticated user)."""

    def __init__(
        self, method: str, path: str, query: str, headers: CIMultiDict[str], body: bytes
    ) -> None:
        super().__init__()
        self.method = method
        self.path = path
        self.headers = CIMultiDictProxy(headers)
        self._query_string = query
        self._query: MultiDictProxy[str] | None = None
        self._body = body

    @property
    def query(self) -> MultiDictProxy[str]:
        if self._query is None:
            self._query = _parsed_query(self._query_string)
        return self._query

    async def read(self) -> bytes:
        return self._body


# A controller sends the same few query strings again and again (``fieldManager=...``).
_QUERIES: dict[str, MultiDictProxy[str]] = {}
_QUERIES_KEPT = 256


def _parsed_query(query: str) -> MultiDictProxy[str]:
    """A query string's parameters (read-only, so one parse serves every request with it)."""
    found = _QUERIES.get(query)
    if found is None:
        if len(_QUERIES) >= _QUERIES_KEPT:
            _QUERIES.clear()
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        found = _QUERIES[query] = MultiDictProxy(MultiDict(pairs))
    return found


def _routes_pattern(paths: list[str]) -> re.Pattern[str] | None:
    """aiohttp route paths (``/a/{name}/b``) as one regular expression for whole paths."""
    if not paths:
        return None
    alternatives = (
        "".join(
            "[^/]+" if p.startswith("{") else re.escape(p) for p in re.split(r"(\{[^}]+\})", path)
        )
        for path in paths
    )
    return re.compile("(?:" + "|".join(alternatives) + ")$")


class Front:
    """The listening side: a protocol per connection, aiohttp's for handed-over ones."""

    def __init__(self, api: HttpApi, aiohttp_protocol: Callable[[], asyncio.Protocol]) -> None:
        self.api = api
        self.aiohttp_protocol = aiohttp_protocol
        self.connections: set[_Connection] = set()
        self._extras = _routes_pattern([path for _, path, _ in api.routes])
        self._server: asyncio.Server | None = None
        self._date = ("", 0)

    async def start(self, host: str, port: int, ssl_context: Any) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self, loop), host, port, ssl=ssl_context, reuse_address=True
        )
        sockets = self._server.sockets or ()
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        """Stop listening and drop the connections still here (handed-over ones are aiohttp's
        to close)."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        for conn in list(self.connections):
            conn.abort()
        await server.wait_closed()

    def streams(self, method: str, path: str, query: str, headers: CIMultiDict[str]) -> bool:
        """Whether aiohttp serves this request (see the module's docstring)."""
        if method not in _LEAN_METHODS or "upgrade" in headers:
            return True
        segments = path.rstrip("/").split("/")
        if segments[-1] in _STREAMED or "watch" in segments:
            return True
        if ("watch" in query or "%" in query) and "watch" in _parsed_query(query):
            return True
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return True
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            return True
        return self._extras is not None and self._extras.match(path) is not None

    def date(self) -> str:
        now = int(time.time())
        if self._date[1] != now:
            self._date = (formatdate(now, usegmt=True), now)
        return self._date[0]


class _Connection(asyncio.Protocol):
    """One client connection while its requests are answered here."""

    def __init__(self, front: Front, loop: asyncio.AbstractEventLoop) -> None:
        self._front = front
        self._loop = loop
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        # The request being read: its URL, then its method, path and query once the head is in.
        self._url = b""
        self._head = ("", "", "")
        self._headers: CIMultiDict[str] = CIMultiDict()
        self._body: list[bytes] = []
        # Bytes since the current request began (to hand it over whole), and whether a request
        # began after another ended within the same read (pipelined: it cannot be handed over).
        self._raw: list[bytes] = []
        self._reading = False
        self._ended_in_read = False
        self._pipelined = False
        self._hand_over = False
        self._successor: asyncio.Protocol | None = None  # aiohttp's, once handed over
        self._pending: list[tuple[LeanRequest, bool]] = []  # (request, keep-alive)
        self._task: asyncio.Task[None] | None = None
        self._idle: IdleClose | None = None

    # --- protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._front.connections.add(self)
        self._idle = IdleClose(
            self._loop,
            transport,
            KEEPALIVE_TIMEOUT_S,
            lambda: self._task is not None or self._reading,
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone()
        if self._task is not None:
            self._task.cancel()  # as aiohttp's handler_cancellation: the client went away

    def data_received(self, data: bytes) -> None:
        if self._successor is not None:
            # Read before the transport took the new protocol (a TLS record decrypted in parts).
            self._successor.data_received(data)
            return
        if self._idle is not None:
            self._idle.touch()
        if self._reading:
            self._raw.append(data)
        else:
            self._raw = [data]
        self._ended_in_read = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # the head is in: ``on_headers_complete`` has decided to hand it over
        except httptools.HttpParserError as err:
            if not self._hand_over:
                self._reply_and_close(400, f"malformed request: {err}")
                return
        if self._hand_over:
            self._give_to_aiohttp()

    # --- parser callbacks (httptools) -----------------------------------------------------

    def on_message_begin(self) -> None:
        self._pipelined = self._ended_in_read
        self._reading = True
        self._url, self._headers, self._body = b"", CIMultiDict(), []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        if self._hand_over:
            return
        method = self._parser.get_method().decode("latin-1")
        parsed = httptools.parse_url(self._url)
        path = urllib.parse.unquote(parsed.path.decode("latin-1"))
        query = (parsed.query or b"").decode("latin-1")
        self._head = (method, path, query)
        if self._front.streams(method, path, query, self._headers):
            if self._pipelined or self._task is not None or self._pending:
                self._reply_and_close(400, "a streamed request may not be pipelined")
            else:
                self._hand_over = True
            return
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if not self._hand_over:
            self._body.append(body)

    def on_message_complete(self) -> None:
        self._reading = False
        self._ended_in_read = True
        if self._hand_over or self.transport is None or self.transport.is_closing():
            return
        request = LeanRequest(*self._head, self._headers, b"".join(self._body))
        self._pending.append((request, self._parser.should_keep_alive()))
        if self._task is None:
            self._task = self._loop.create_task(self._answer_all())

    # --- answering ------------------------------------------------------------------------

    async def _answer_all(self) -> None:
        try:
            while self._pending and self.transport is not None:
                request, keep_alive = self._pending.pop(0)
                try:
                    response = await self._answer(request)
                except ConnectionResetError:
                    self.abort()
                    return
                self._write(response, close=not keep_alive)
                if self._idle is not None:
                    self._idle.touch()
                if not keep_alive:
                    self.transport.close()
                    return
        finally:
            self._task = None

    async def _answer(self, request: LeanRequest) -> web.Response:
        api = self._front.api
        try:
            # A duck-typed web.Request: HttpApi reads only what LeanRequest has.
            response = await api.answer(cast(web.Request, request))
        except web.HTTPException as exc:
            return web.Response(status=exc.status, text=exc.text or exc.reason)
        if type(response) is not web.Response or not isinstance(response.body, bytes):
            # Only streams answer otherwise, and those were handed to aiohttp.
            log.error("%s %s answered with a stream here", request.method, request.path)
            return error_response(E.ApiError(500, "InternalError", "Internal error occurred"))
        return response

    def _write(self, response: web.Response, *, close: bool) -> None:
        assert self.transport is not None
        body = cast(bytes, response.body)
        status = response.status
        reason = response.reason or "Unknown"  # aiohttp's phrase; none for odd codes
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{k}: {v}" for k, v in response.headers.items() if k.lower() != "content-length"]
        if "Content-Type" not in response.headers:
            lines.append("Content-Type: application/octet-stream")
        lines += [f"Content-Length: {len(body)}", f"Date: {self._front.date()}"]
        if close:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.transport.write(head + body)

    def _reply_and_close(self, status: int, text: str) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._write(web.Response(status=status, text=text), close=True)
            self.transport.close()

    def _give_to_aiohttp(self) -> None:
        """The connection is aiohttp's from this request on."""
        assert self.transport is not None
        self._gone()
        protocol = self._successor = self._front.aiohttp_protocol()
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        protocol.data_received(b"".join(self._raw))
        self._raw = []

    # --- lifetime -------------------------------------------------------------------------

    def _gone(self) -> None:
        self._front.connections.discard(self)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
