"""The lean HTTP/1.1 client and server (``kubetrain.kube.http1``) under what a network does.

Each test puts a raw asyncio socket peer on the other end, so it controls every byte: when the
answer comes, whether the connection stays open, how the body is framed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from kubetrain.kube import http1
from kubetrain.kube.client import TRANSPORT_ERRORS

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
Reply = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawServer:
    """Reads one request head (and its Content-Length body) at a time and lets ``reply`` answer."""

    reply: Reply
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                await self.reply(request, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


StartRaw = Callable[[Reply], Awaitable[RawServer]]


@pytest.fixture
async def raw() -> AsyncIterator[StartRaw]:
    servers: list[asyncio.Server] = []

    async def start(reply: Reply) -> RawServer:
        peer = RawServer(reply)
        server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
        servers.append(server)
        peer.port = server.sockets[0].getsockname()[1]
        return peer

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def answer_ok(_request: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(OK)


async def get(pool: http1.Pool, path: str = "/api/v1/namespaces/default") -> http1.Answer:
    return await pool.request("GET", path, params={}, headers={"Accept": "*/*"}, content=None)


async def test_requests_reuse_one_kept_alive_connection(raw: StartRaw) -> None:
    peer = await raw(answer_ok)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    answers = [await get(pool) for _ in range(5)]
    await pool.close()
    assert [(a.status, a.body) for a in answers] == [(200, b"{}")] * 5
    assert peer.connections == 1
    first = peer.requests[0].decode()
    assert first.startswith("GET /api/v1/namespaces/default HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{peer.port}\r\n" in first


async def test_a_body_and_the_query_are_sent_as_given(raw: StartRaw) -> None:
    peer = await raw(answer_ok)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    params = {"fieldManager": "trainer", "force": "true"}
    headers = {"Content-Type": "application/apply-patch+yaml"}
    await pool.request("PATCH", "/apis/x/v1/a b", params=params, headers=headers, content=b"{}")
    await pool.close()
    sent = peer.requests[0].decode()
    assert sent.startswith("PATCH /apis/x/v1/a%20b?fieldManager=trainer&force=true HTTP/1.1\r\n")
    assert "Content-Length: 2\r\n" in sent and sent.endswith("\r\n\r\n{}")


async def test_a_chunked_answer_is_read_whole(raw: StartRaw) -> None:
    async def chunked(_request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"kind":', b'"Status"}'):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")

    peer = await raw(chunked)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    answer = await get(pool)
    await pool.close()
    assert (answer.status, answer.reason, answer.body) == (404, "Not Found", b'{"kind":"Status"}')


async def test_connection_close_is_honoured_and_the_next_request_reconnects(raw: StartRaw) -> None:
    async def closing(_request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(OK.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        writer.close()

    peer = await raw(closing)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    assert [(await get(pool)).status for _ in range(3)] == [200, 200, 200]
    await pool.close()
    assert peer.connections == 3


@pytest.mark.parametrize(
    ("method", "resendable", "sent_again"),
    [
        pytest.param(
            "GET", None, True, id="an idempotent request is sent again on a new connection"
        ),
        pytest.param(
            "POST", None, False, id="a create is not sent twice: a transport error instead"
        ),
        pytest.param(
            "POST", True, True, id="a POST its caller may send twice (a review) is sent again"
        ),
        pytest.param(
            "GET", False, False, id="a GET its caller must not send twice is not sent again"
        ),
    ],
)
async def test_a_connection_closed_while_idle(
    raw: StartRaw, method: str, resendable: bool | None, sent_again: bool
) -> None:
    # The server answers the first request, then drops the next one unanswered: the race of a
    # keep-alive connection the server closes just as it is reused.
    async def first_only(_request: bytes, writer: asyncio.StreamWriter) -> None:
        if len(peer.requests) == 1:
            writer.write(OK)
        else:
            writer.close()

    peer = await raw(first_only)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    await get(pool)
    call = pool.request(method, "/x", params={}, headers={}, content=b"{}", resendable=resendable)
    if sent_again:
        peer.requests.clear()  # the new connection's first request is answered
        assert (await call).status == 200
    else:
        with pytest.raises(TRANSPORT_ERRORS):
            await call
    await pool.close()


async def test_silence_past_the_timeout_is_a_transport_error_a_slow_answer_is_not(
    raw: StartRaw,
) -> None:
    async def trickle(request: bytes, writer: asyncio.StreamWriter) -> None:
        if b"/silent" in request:
            await asyncio.sleep(5.0)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
        for byte in b"abcde":  # 0.25 s apart: 1.25 s in all, never 1 s silent
            await writer.drain()
            await asyncio.sleep(0.25)
            writer.write(bytes([byte]))

    peer = await raw(trickle)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=1.0)
    assert (await get(pool, "/slow")).body == b"abcde"
    with pytest.raises(TimeoutError):
        await get(pool, "/silent")
    await pool.close()


async def test_a_refused_connection_is_a_transport_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    pool = http1.Pool(f"http://127.0.0.1:{port}", None, timeout=5)
    with pytest.raises(TRANSPORT_ERRORS) as refused:
        await get(pool)
    await pool.close()
    # It names the address and keeps the cause (the API server words its webhook errors so).
    assert isinstance(refused.value, http1.ConnectError)
    assert (refused.value.host, refused.value.port) == ("127.0.0.1", port)
    assert isinstance(refused.value.os_error, ConnectionRefusedError)


async def test_an_answer_past_max_answer_is_a_transport_error_and_the_next_one_reconnects(
    raw: StartRaw,
) -> None:
    async def sized(request: bytes, writer: asyncio.StreamWriter) -> None:
        body = b"x" * (11 if b"/big" in request else 10)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    peer = await raw(sized)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5, max_answer=10)
    assert (await get(pool, "/small")).body == b"x" * 10
    with pytest.raises(TRANSPORT_ERRORS) as too_large:
        await get(pool, "/big")
    assert isinstance(too_large.value, http1.AnswerTooLarge)
    assert (await get(pool, "/small")).status == 200
    await pool.close()
    assert peer.connections == 2


async def test_a_streamed_answer_comes_as_it_is_sent(raw: StartRaw) -> None:
    first_read = asyncio.Event()

    async def watch(_request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\na\n\r\n")
        await first_read.wait()  # the second event exists only once the first was read
        writer.write(b"2\r\nb\n\r\n0\r\n\r\n")

    peer = await raw(watch)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    got = []
    async with pool.stream("GET", "/w", params={}, headers={}, read_timeout=5) as answer:
        assert answer.status == 200
        async for chunk in answer.chunks():
            got.append(chunk)
            first_read.set()
    await pool.close()
    assert got == [b"a\n", b"b\n"]


async def test_a_stream_silent_past_its_read_timeout_is_a_transport_error(raw: StartRaw) -> None:
    async def stall(_request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await asyncio.sleep(5)

    peer = await raw(stall)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    async with pool.stream("GET", "/w", params={}, headers={}, read_timeout=0.5) as answer:
        with pytest.raises(TRANSPORT_ERRORS):
            await answer.read_all()
    await pool.close()


async def test_a_stream_whose_reader_falls_behind_backs_up_to_the_server(raw: StartRaw) -> None:
    # 64 MiB offered while the reader stops after its first chunk: the client holds about
    # STREAM_HIGH_WATER, the kernel's socket buffers some more, and the server's writes block.
    # Once reading goes on, every byte still arrives.
    piece, pieces = b"x" * 65536, 1024
    blocked_at: list[int] = []
    all_sent = asyncio.Event()

    async def flood(_request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for sent in range(pieces):
            writer.write(b"10000\r\n" + piece + b"\r\n")
            if not blocked_at:
                try:
                    await asyncio.wait_for(writer.drain(), 2)
                    continue
                except TimeoutError:
                    blocked_at.append((sent + 1) * len(piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        all_sent.set()

    peer = await raw(flood)
    pool = http1.Pool(f"http://127.0.0.1:{peer.port}", None, timeout=5)
    received = 0
    async with pool.stream("GET", "/logs", params={}, headers={}, read_timeout=10) as answer:
        async for chunk in answer.chunks():
            received += len(chunk)
            while not blocked_at and not all_sent.is_set():
                await asyncio.sleep(0.05)  # the reader falls behind
    await pool.close()
    assert blocked_at and blocked_at[0] < 24 * 2**20, blocked_at
    assert received == pieces * len(piece)


# --- the server ------------------------------------------------------------------------------


async def echo(request: http1.Request) -> http1.Response:
    return http1.Response(200, f"{request.method} {request.path} {len(request.body)}".encode())


async def exchange(port: int, data: bytes, until: int) -> bytes:
    """Send ``data`` on one connection and read until ``until`` answers (or the close)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = b""
    while got.count(b"HTTP/1.1 ") < until:
        chunk = await reader.read(65536)
        if not chunk:
            break
        got += chunk
    writer.close()
    return got


@pytest.fixture
async def served() -> AsyncIterator[int]:
    server = http1.Server(echo, max_body=100)
    port = await server.start("127.0.0.1", 0, None)
    yield port
    await server.stop()


async def test_the_server_answers_requests_in_order_on_one_connection(served: int) -> None:
    requests = b"".join(
        b"POST /p%d HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" % i for i in range(3)
    )
    got = await exchange(served, requests, until=3)
    bodies = [part.rsplit(b"\r\n\r\n", 1)[-1] for part in got.split(b"HTTP/1.1 ")[1:]]
    assert bodies == [b"POST /p0 3", b"POST /p1 3", b"POST /p2 3"]


async def test_the_server_refuses_a_body_past_its_limit_and_closes(served: int) -> None:
    body = b"x" * 101
    got = await exchange(
        served, b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + body, until=2
    )
    assert got.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in got


async def test_the_server_answers_expect_100_continue_and_garbage(served: int) -> None:
    expect = b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz"
    got = await exchange(served, expect, until=2)
    assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
    assert (await exchange(served, b"NOT HTTP AT ALL\r\n\r\n", until=1)).startswith(
        b"HTTP/1.1 400 "
    )


async def test_a_stopping_server_answers_what_it_received_closes_the_idle_and_takes_no_more() -> (
    None
):
    """As Go's ``Shutdown``: an admission review in flight when the pod is told to stop is
    still answered (then its connection closes); an idle kept-alive connection closes at once;
    no new connection is taken."""
    answering, release = asyncio.Event(), asyncio.Event()

    async def slow(request: http1.Request) -> http1.Response:
        if request.path == "/slow":
            answering.set()
            await release.wait()
        return http1.Response(200, request.path.encode())

    server = http1.Server(slow)
    port = await server.start("127.0.0.1", 0, None)
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    idle_writer.write(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await idle_reader.readuntil(b"/fast")).startswith(b"HTTP/1.1 200 OK")
    busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)
    busy_writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(answering.wait(), 5)
    stopping = asyncio.create_task(server.stop(grace=30))
    assert await asyncio.wait_for(idle_reader.read(), 5) == b""  # closed, answered nothing
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    assert not stopping.done()
    release.set()
    answer = await asyncio.wait_for(busy_reader.read(), 5)  # the answer, then the close
    assert answer.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in answer
    assert answer.endswith(b"/slow")
    await asyncio.wait_for(stopping, 5)
    for writer in (idle_writer, busy_writer):
        writer.close()


async def test_a_stop_without_grace_drops_a_request_in_flight() -> None:
    answering, never = asyncio.Event(), asyncio.Event()

    async def stuck(_request: http1.Request) -> http1.Response:
        answering.set()
        await never.wait()
        return http1.Response(200)

    server = http1.Server(stuck)
    port = await server.start("127.0.0.1", 0, None)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(answering.wait(), 5)
    await asyncio.wait_for(server.stop(), 5)
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_kept_alive_connection_closes_once_idle_for_the_timeout_not_while_answering() -> (
    None
):
    async def slow(_request: http1.Request) -> http1.Response:
        await asyncio.sleep(0.8)  # longer than the keep-alive timeout below
        return http1.Response(200, b"late")

    server = http1.Server(slow, keepalive_timeout=0.3)
    port = await server.start("127.0.0.1", 0, None)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await asyncio.wait_for(reader.readuntil(b"late"), 5)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        # Idle from here on: closed after the timeout, without a word.
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    finally:
        await server.stop()
