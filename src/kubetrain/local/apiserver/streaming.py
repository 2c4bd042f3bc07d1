"""``pods/exec``, ``pods/attach`` and ``pods/portforward``: the streaming subresources.

The API server checks the request as kube-apiserver does (the pod exists and has a node, the
container is one of the pod's, the options make sense), then upgrades the connection and hands
it to the `PodStreamer` the daemon registered: the kubelet side, which the API server never
imports. Wire protocols:

- exec and attach over WebSocket, subprotocols ``v5.channel.k8s.io`` (kubectl 1.30+) and
  ``v4.channel.k8s.io`` (the Python client's ``stream()``): every message starts with its
  channel, 0 stdin, 1 stdout, 2 stderr, 3 the final ``Status``, 4 terminal resizes
  (``{"Width":..,"Height":..}``), and in v5, 255 closes a channel (``[255, 0]`` ends stdin).
  The exit status is a ``Status`` as the kubelet writes it: ``NonZeroExitCode`` with the code
  as the ``ExitCode`` cause, which kubectl turns into its own exit code.
- port-forward over WebSocket, ``v4.channel.k8s.io`` (the Python client): two channels per
  requested port (data, error), each opened by a frame holding the port (little endian);
  ``SPDY/3.1+portforward.k8s.io`` (kubectl 1.31+): SPDY/3.1 tunnelled in binary messages,
  one data and one error stream per local connection (`spdy`).

Not served: the SPDY upgrade without WebSocket (what kubectl used before 1.30, and falls back
to only when the WebSocket upgrade fails) and the base64 channel variants.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver import spdy

__all__ = [
    "PodStreamer",
    "PortStream",
    "StdioSession",
    "exit_status",
    "serve_exec",
    "serve_portforward",
]

log = logging.getLogger(__name__)

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
# How long output may keep flowing after the command has exited (a background process that
# holds the pipe open would otherwise keep the session open forever).
_DRAIN_S = 2.0
_TRUE = ("true", "1")


class StdioSession(Protocol):
    """A command (exec) or a container's own process (attach), as the kubelet runs it."""

    tty: bool
    stdout: asyncio.StreamReader | None
    stderr: asyncio.StreamReader | None

    async def write_stdin(self, data: bytes) -> None: ...
    def close_stdin(self) -> None: ...
    def resize(self, width: int, height: int) -> None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...
    def close(self) -> None: ...


class PortStream(Protocol):
    """One connection to a pod's port."""

    reader: asyncio.StreamReader

    async def write(self, data: bytes) -> None: ...
    def write_eof(self) -> None: ...
    async def error(self) -> str: ...
    def close(self) -> None: ...


class PodStreamer(Protocol):
    """The kubelet side. Raises `LookupError` (its message the kubelet's) when the pod or
    container does not run; any other exception is a failure to start."""

    async def exec(
        self,
        pod: Mapping[str, Any],
        container: str,
        command: Sequence[str],
        *,
        stdin: bool,
        tty: bool,
    ) -> StdioSession: ...

    async def attach(
        self, pod: Mapping[str, Any], container: str, *, stdin: bool, tty: bool
    ) -> StdioSession: ...

    async def dial(self, pod: Mapping[str, Any], port: int) -> PortStream: ...

    def check(self, pod: Mapping[str, Any], container: str | None) -> None:
        """Raise `LookupError` unless the pod (and ``container``) runs here."""


def exit_status(code: int, command: Sequence[str]) -> dict[str, Any]:
    """The ``Status`` the kubelet writes on the error channel when a command has ended."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command "
        f"[{' '.join(command)}], exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def _flag(query: Mapping[str, str], name: str) -> bool:
    return str(query.get(name, "")).lower() in _TRUE


def _upgrade_failed(err: Exception) -> E.ApiError:
    return E.ApiError(
        500, "InternalError", f"Internal error occurred: unable to upgrade connection: {err}"
    )


def _check(streamer: PodStreamer, pod: Mapping[str, Any], container: str | None) -> None:
    try:
        streamer.check(pod, container)
    except LookupError as err:
        raise _upgrade_failed(err) from err


def _require_websocket(request: web.Request) -> None:
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise E.bad_request(
            "Upgrade request required: this server streams over WebSocket "
            f"({V5}, {V4}, {SPDY_TUNNEL}); set KUBECTL_REMOTE_COMMAND_WEBSOCKETS and "
            "KUBECTL_PORT_FORWARD_WEBSOCKETS to true (the default since kubectl 1.31)"
        )


class _Channels:
    """Channel-prefixed messages over one WebSocket; writes serialised."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self._lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        async with self._lock:
            if not self.ws.closed:
                await self.ws.send_bytes(bytes([channel]) + data)


async def _pump(source: asyncio.StreamReader, send: Callable[[bytes], Awaitable[None]]) -> None:
    while data := await source.read(32 * 1024):
        await send(data)


async def serve_exec(
    request: web.Request,
    streamer: PodStreamer,
    pod: Mapping[str, Any],
    container: str,
    *,
    attach: bool,
) -> web.StreamResponse:
    """Run (exec) or join (attach) a process of ``container`` over a WebSocket."""
    q = request.query
    command = q.getall("command", [])
    stdin, stdout, stderr, tty = (_flag(q, n) for n in ("stdin", "stdout", "stderr", "tty"))
    if not attach and not command:
        raise E.bad_request("you must specify at least one command for the container")
    if not (stdin or stdout or stderr):
        raise E.bad_request("you must specify at least one of stdin, stdout, stderr")
    # First, so that kubectl's SPDY retry after a failed WebSocket upgrade shows why it failed.
    _check(streamer, pod, container)
    _require_websocket(request)
    try:
        if attach:
            session = await streamer.attach(pod, container, stdin=stdin, tty=tty)
        else:
            session = await streamer.exec(pod, container, command, stdin=stdin, tty=tty)
    except LookupError as err:
        raise _upgrade_failed(err) from err
    except Exception as err:
        log.exception("exec into %s failed", container)
        raise _upgrade_failed(err) from err
    ws = web.WebSocketResponse(protocols=(V5, V4), autoping=True)
    try:
        await ws.prepare(request)
    except BaseException:
        session.kill()
        session.close()
        raise
    channels = _Channels(ws)
    pumps = []
    if session.stdout is not None:
        out = session.stdout
        pumps.append(asyncio.ensure_future(_pump(out, lambda d: channels.send(STDOUT, d))))
    if session.stderr is not None:
        err_out = session.stderr
        pumps.append(asyncio.ensure_future(_pump(err_out, lambda d: channels.send(STDERR, d))))
    inbound = asyncio.ensure_future(_inbound(ws, session))
    waiter = asyncio.ensure_future(session.wait())
    try:
        await asyncio.wait({waiter, inbound}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            # The client went away first: the command goes with it.
            session.kill()
            return ws
        # An attach ends well when the container does, whatever its exit code (as with the
        # kubelet); an exec reports the command's.
        code = 0 if attach else waiter.result()
        if pumps:
            await asyncio.wait(pumps, timeout=_DRAIN_S)
        body = json.dumps(exit_status(code, command), separators=(",", ":"))
        await channels.send(ERROR, body.encode())
        await ws.close()
    except (ConnectionError, asyncio.CancelledError):
        session.kill()
        raise
    finally:
        for task in [*pumps, inbound, waiter]:
            task.cancel()
        session.close()
    return ws


async def _inbound(ws: web.WebSocketResponse, session: StdioSession) -> None:
    """stdin, resizes and (v5) channel closes from the client, until it closes."""
    async for msg in ws:
        if msg.type == WSMsgType.BINARY:
            data = bytes(msg.data)
        elif msg.type == WSMsgType.TEXT:
            data = str(msg.data).encode()
        else:
            break
        if not data:
            continue
        channel, payload = data[0], data[1:]
        if channel == STDIN and payload:
            await session.write_stdin(payload)
        elif channel == RESIZE:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                size = json.loads(payload)
                session.resize(int(size.get("Width", 0)), int(size.get("Height", 0)))
        elif channel == CLOSE and ws.ws_protocol == V5 and payload[:1] == bytes([STDIN]):
            session.close_stdin()


def _ports(values: Sequence[str]) -> list[int]:
    """``ports=8080,9090`` and ``ports=8080&ports=9090`` alike."""
    ports = []
    for item in values:
        for text in item.split(","):
            try:
                port = int(text)
            except ValueError:
                raise E.bad_request(f'invalid port "{text}"') from None
            if not 0 < port < 65536:
                raise E.bad_request(f"port {port} must be > 0 and < 65536")
            ports.append(port)
    return ports


async def serve_portforward(
    request: web.Request, streamer: PodStreamer, pod: Mapping[str, Any]
) -> web.StreamResponse:
    """Forward the ports the client asks for (v4 channels) or opens (SPDY streams)."""
    _check(streamer, pod, None)
    _require_websocket(request)
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    ports = _ports(request.query.getall("ports", []))
    if SPDY_TUNNEL not in offered and not ports:
        raise E.bad_request('query parameter "ports" is required')
    ws = web.WebSocketResponse(protocols=(SPDY_TUNNEL, V4), autoping=True)
    await ws.prepare(request)
    if ws.ws_protocol == SPDY_TUNNEL:
        await _SpdyForwarder(ws, streamer, pod).run()
    else:
        await _forward_channels(ws, streamer, pod, ports)
    return ws


async def _forward_channels(
    ws: web.WebSocketResponse, streamer: PodStreamer, pod: Mapping[str, Any], ports: list[int]
) -> None:
    channels = _Channels(ws)
    conns: list[PortStream | None] = []
    tasks = []
    for i, port in enumerate(ports):
        head = port.to_bytes(2, "little")
        await channels.send(2 * i, head)
        await channels.send(2 * i + 1, head)
        try:
            conn: PortStream | None = await streamer.dial(pod, port)
        except Exception as err:
            await channels.send(2 * i + 1, _forward_error(port, str(err)).encode())
            conn = None
        conns.append(conn)
        if conn is not None:
            tasks.append(asyncio.ensure_future(_channel_out(channels, 2 * i, port, conn)))
    inbound = asyncio.ensure_future(_channel_in(ws, conns))
    try:
        if tasks:
            # Until the client goes, or every pod connection has ended.
            await asyncio.wait(
                {inbound, asyncio.ensure_future(_all(tasks))}, return_when=asyncio.FIRST_COMPLETED
            )
        await ws.close()
    finally:
        inbound.cancel()
        for task in tasks:
            task.cancel()
        for c in conns:
            if c is not None:
                c.close()


async def _all(tasks: Sequence[asyncio.Future[None]]) -> None:
    await asyncio.gather(*tasks)


async def _channel_out(channels: _Channels, channel: int, port: int, conn: PortStream) -> None:
    await _pump(conn.reader, lambda d: channels.send(channel, d))
    why = await conn.error()
    if why:
        await channels.send(channel + 1, _forward_error(port, why).encode())


async def _channel_in(ws: web.WebSocketResponse, conns: list[PortStream | None]) -> None:
    async for msg in ws:
        if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
            break
        data = bytes(msg.data) if msg.type == WSMsgType.BINARY else str(msg.data).encode()
        if not data or data[0] % 2 or data[0] // 2 >= len(conns):
            continue
        conn = conns[data[0] // 2]
        if conn is not None and len(data) > 1:
            await conn.write(data[1:])


def _forward_error(port: int, why: str) -> str:
    return f"error forwarding port {port} to pod: {why}"


class _SpdyForwarder:
    """kubectl's port-forward: SPDY/3.1 streams in a WebSocket, a pair per connection."""

    def __init__(
        self, ws: web.WebSocketResponse, streamer: PodStreamer, pod: Mapping[str, Any]
    ) -> None:
        self.ws = ws
        self.streamer = streamer
        self.pod = pod
        self.reader = spdy.FrameReader()
        self.writer = spdy.FrameWriter()
        self._lock = asyncio.Lock()
        # requestID → {"error": stream id, "data": stream id, "port": port}
        self.pairs: dict[str, dict[str, int]] = {}
        # data stream id → what the client sent on it, until the pod connection takes it
        # (bytes may arrive before the pod has been dialled); None: the client's end.
        self.inbound: dict[int, asyncio.Queue[bytes | None]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_stream = 0

    async def send(self, *frames: bytes) -> None:
        async with self._lock:
            for frame in frames:
                if not self.ws.closed:
                    await self.ws.send_bytes(frame)

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.BINARY:
                    break
                try:
                    frames = self.reader.feed(bytes(msg.data))
                except spdy.SpdyError as err:
                    log.warning("port-forward: %s", err)
                    break
                for frame in frames:
                    if not await self._handle(frame):
                        return
        finally:
            for task in list(self.tasks):
                task.cancel()

    async def _handle(self, frame: spdy.Frame) -> bool:
        if frame.kind == spdy.DATA:
            queue = self.inbound.get(frame.stream_id)
            if queue is not None:
                if frame.data:
                    queue.put_nowait(frame.data)
                if frame.fin:
                    queue.put_nowait(None)
        elif frame.kind == spdy.SYN_STREAM:
            await self._open(frame)
        elif frame.kind == spdy.PING:
            await self.send(self.writer.ping(frame.value))
        elif frame.kind == spdy.RST_STREAM:
            queue = self.inbound.get(frame.stream_id)
            if queue is not None:
                queue.put_nowait(None)
        elif frame.kind == spdy.GOAWAY:
            return False
        return True

    async def _open(self, frame: spdy.Frame) -> None:
        sid = frame.stream_id
        self.last_stream = max(self.last_stream, sid)
        kind = frame.headers.get("streamtype", "")
        request = frame.headers.get("requestid", "")
        try:
            port = int(frame.headers.get("port", ""))
        except ValueError:
            port = 0
        if kind not in ("error", "data") or not 0 < port < 65536:
            await self.send(self.writer.rst_stream(sid, spdy.PROTOCOL_ERROR))
            return
        await self.send(self.writer.syn_reply(sid))
        pair = self.pairs.setdefault(request, {"port": port})
        pair[kind] = sid
        if kind == "data":
            self.inbound[sid] = asyncio.Queue()
        if "error" in pair and "data" in pair:
            del self.pairs[request]
            task = asyncio.ensure_future(self._forward(pair["data"], pair["error"], port))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _forward(self, data_id: int, error_id: int, port: int) -> None:
        why = ""
        try:
            conn = await self.streamer.dial(self.pod, port)
        except Exception as err:
            why = str(err)
        else:
            upstream = asyncio.ensure_future(self._upstream(self.inbound[data_id], conn))
            try:
                while chunk := await conn.reader.read(spdy.MAX_DATA):
                    await self.send(*self.writer.data(data_id, chunk))
                why = await conn.error()
            finally:
                upstream.cancel()
                conn.close()
        self.inbound.pop(data_id, None)
        if why:
            await self.send(*self.writer.data(error_id, _forward_error(port, why).encode()))
        await self.send(*self.writer.data(data_id, b"", fin=True))
        await self.send(*self.writer.data(error_id, b"", fin=True))

    @staticmethod
    async def _upstream(queue: asyncio.Queue[bytes | None], conn: PortStream) -> None:
        while (chunk := await queue.get()) is not None:
            await conn.write(chunk)
        conn.write_eof()
