"""The dashboard's aiohttp application: static pages, a JSON API and Server-Sent Events.

Routes (all behind :class:`~kubetrain.dashboard.security.Guard`):

- ``/`` and ``/static/...``: the single-page front end, shipped inside this package;
- ``/api/session``: where the dashboard points, whether actions are allowed, the CSRF value;
- ``/api/trainjobs/stream`` (SSE): the job table, then every change, from the :class:`Hub`;
- ``/api/trainjobs/{ns}/{name}`` and ``.../stream`` (SSE), ``.../metrics``, ``.../logs`` (SSE);
- ``/api/runtimes``;
- ``/api/experiments/stream`` (SSE), ``/api/experiments/{ns}/{name}`` and ``.../stream`` (SSE);
- ``POST /api/trainjobs/{ns}/{name}/{suspend|resume|delete}`` with ``--allow-actions`` only.

Client calls block (the SDK's synchronous client, shared with the CLI), so each runs in a
thread.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

from kubetrain.client.errors import ClientError, NotFoundError
from kubetrain.client.jobs import JobClient
from kubetrain.dashboard import views
from kubetrain.dashboard.hub import EXPERIMENTS, TRAINJOBS, Hub, Message
from kubetrain.dashboard.security import COOKIE, Guard

__all__ = ["DashboardConfig", "build_app", "serve"]

STATIC = Path(str(resources.files("kubetrain.dashboard") / "static"))
_HEARTBEAT_S = 15.0
_AGES_S = 10.0
_ACTIONS = ("suspend", "resume", "delete")


@dataclass
class DashboardConfig:
    """How ``kubetrain dashboard`` was started."""

    address: str = "127.0.0.1"
    port: int = 0
    allow_actions: bool = False


HUB = web.AppKey("hub", Hub)
CONFIG = web.AppKey("config", DashboardConfig)
GUARD = web.AppKey("guard", Guard)
CLIENT = web.AppKey("client", JobClient)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _client_error(exc: ClientError) -> web.Response:
    if isinstance(exc, NotFoundError) or exc.code == 404:
        return _error(404, str(exc))
    if exc.code in (401, 403):
        return _error(403, f"the Kubernetes API refused: {exc}")
    return _error(502, str(exc))


async def _blocking(func: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(func, *args)


# --- pages ---------------------------------------------------------------------------------


async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def session(request: web.Request) -> web.Response:
    jc = request.app[CLIENT]
    config = request.app[CONFIG]
    return web.json_response(
        {
            "server": jc.conn.server,
            "context": jc.conn.context,
            "local": jc.conn.local,
            "namespace": jc.conn.namespace,
            "allowActions": config.allow_actions,
            "csrf": request.app[GUARD].csrf,
        },
        headers={"Cache-Control": "no-store"},
    )


# --- Server-Sent Events ----------------------------------------------------------------------


async def _sse_open(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    return response


def _json(data: Any, status: int = 200) -> web.Response:
    # msgspec: a 100,000-point series or a 5,000-row table encodes in a fraction of json's time.
    return web.Response(
        body=msgspec.json.encode(data),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


async def _send(response: web.StreamResponse, event: str, data: Any) -> None:
    await response.write(
        b"event: " + event.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"
    )


async def _table_stream(request: web.Request, channel: str) -> web.StreamResponse:
    hub = request.app[HUB]
    response = await _sse_open(request)
    with hub.subscribe(channel) as queue:
        loop = asyncio.get_running_loop()
        next_ages = loop.time() + _AGES_S
        while True:
            try:
                message = await asyncio.wait_for(queue.get(), timeout=_HEARTBEAT_S / 3)
            except TimeoutError:
                message = None
            try:
                if message is not None:
                    # "error" is EventSource's own event (a lost connection): ours is api-error.
                    kind = str(message["type"])
                    await _send(response, "api-error" if kind == "error" else kind, message)
                if loop.time() >= next_ages:
                    next_ages = loop.time() + _AGES_S
                    await _send(response, "ages", hub.ages(channel))
                elif message is None:
                    await response.write(b": keep-alive\n\n")
            except (ConnectionResetError, asyncio.CancelledError):
                break
    return response


async def jobs_stream(request: web.Request) -> web.StreamResponse:
    return await _table_stream(request, TRAINJOBS)


async def experiments_stream(request: web.Request) -> web.StreamResponse:
    return await _table_stream(request, EXPERIMENTS)


async def job_stream(request: web.Request) -> web.StreamResponse:
    """``changed`` whenever the job's row changes (its status, or one of its pods)."""
    return await _object_stream(request, TRAINJOBS)


async def experiment_stream(request: web.Request) -> web.StreamResponse:
    """``changed`` whenever the Experiment changes (its status counts every trial's)."""
    return await _object_stream(request, EXPERIMENTS)


async def _object_stream(request: web.Request, channel: str) -> web.StreamResponse:
    hub = request.app[HUB]
    key = f"{request.match_info['ns']}/{request.match_info['name']}"
    response = await _sse_open(request)
    with hub.subscribe(channel) as queue:
        while True:
            try:
                message: Message | None = await asyncio.wait_for(queue.get(), _HEARTBEAT_S)
            except TimeoutError:
                message = None
            try:
                if message is None:
                    await response.write(b": keep-alive\n\n")
                elif message["type"] == "row" and message["row"]["key"] == key:
                    await _send(response, "changed", message["row"])
                elif message["type"] == "gone" and message["key"] == key:
                    await _send(response, "gone", {"key": key})
                elif message["type"] in ("error", "snapshot"):
                    await _send(response, "status", {"error": hub.error_of(channel)})
            except (ConnectionResetError, asyncio.CancelledError):
                break
    return response


async def job_logs(request: web.Request) -> web.StreamResponse:
    """One step's lines (SSE ``line``), following the job until it ends (then ``end``)."""
    from kubetrain.client.logs import follow_step

    ns, name = request.match_info["ns"], request.match_info["name"]
    step = request.query.get("step", "node-0")
    try:
        tail = int(request.query.get("tail", "5000"))
    except ValueError:
        return _error(400, "tail: must be a whole number")
    jc = views.in_namespace(request.app[CLIENT], ns)
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=10000)
    stop = threading.Event()

    def put(item: tuple[str, str]) -> None:
        def deliver() -> None:
            if not lines.full():
                lines.put_nowait(item)

        loop.call_soon_threadsafe(deliver)

    def pump() -> None:
        try:
            for line in follow_step(jc, name, step, tail=tail, stop=stop):
                put(("line", line))
        except ClientError as exc:
            put(("failed", str(exc)))
        except Exception as exc:  # the page must say something rather than hang
            put(("failed", f"{type(exc).__name__}: {exc}"))
        put(("end", ""))

    # Daemon: a followed, quiet container blocks its reader until its next line or its end.
    threading.Thread(target=pump, name=f"logs-{ns}-{name}-{step}", daemon=True).start()
    response = await _sse_open(request)
    try:
        while True:
            try:
                kind, text = await asyncio.wait_for(lines.get(), _HEARTBEAT_S)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            batch = [text] if kind == "line" else []
            while kind == "line" and not lines.empty() and len(batch) < 500:
                kind, text = lines.get_nowait()
                if kind == "line":
                    batch.append(text)
            if batch:
                await _send(response, "lines", batch)
            if kind in ("failed", "end"):
                await _send(response, kind, {"message": text})
                break
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        stop.set()
    return response


# --- JSON ----------------------------------------------------------------------------------


async def job_detail(request: web.Request) -> web.Response:
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        with_events = request.query.get("events") == "1"
        body = await _blocking(
            lambda: views.job_detail(request.app[CLIENT], ns, name, events=with_events)
        )
    except ClientError as exc:
        return _client_error(exc)
    body["allowActions"] = request.app[CONFIG].allow_actions
    return _json(body)


async def job_metrics(request: web.Request) -> web.Response:
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        after = float(request.query.get("after", "0"))
    except ValueError:
        return _error(400, "after: must be a number (seconds since the epoch)")
    try:
        body = await _blocking(views.job_metrics, request.app[CLIENT], ns, name, after)
    except ClientError as exc:
        return _client_error(exc)
    return _json(body)


async def experiment_detail(request: web.Request) -> web.Response:
    ns, name = request.match_info["ns"], request.match_info["name"]
    try:
        hub = request.app[HUB]
        body = await _blocking(
            views.experiment_detail,
            request.app[CLIENT],
            ns,
            name,
            lambda trial: hub.row(ns, trial) is not None,
        )
    except ClientError as exc:
        return _client_error(exc)
    return _json(body)


async def runtimes(request: web.Request) -> web.Response:
    try:
        body = await _blocking(views.runtimes, request.app[CLIENT], request.app[HUB].scope)
    except ClientError as exc:
        return _client_error(exc)
    return _json({"runtimes": body})


async def action(request: web.Request) -> web.Response:
    """Suspend, resume or delete: a plain API call with the dashboard user's credentials."""
    if not request.app[CONFIG].allow_actions:
        return _error(403, "actions are off; start the dashboard with --allow-actions")
    ns, name, verb = (request.match_info[k] for k in ("ns", "name", "action"))
    if verb not in _ACTIONS:
        return _error(404, f"unknown action {verb!r}; one of: {', '.join(_ACTIONS)}")
    jc = request.app[CLIENT]
    try:
        if verb == "delete":
            await _blocking(lambda: jc.delete_job(name, namespace=ns, wait=False))
            changed = True
        else:
            changed = await _blocking(lambda: jc.set_suspend(name, verb == "suspend", namespace=ns))
    except ClientError as exc:
        return _client_error(exc)
    past = {"suspend": "suspended", "resume": "resumed", "delete": "deleted"}[verb]
    note = "" if changed else " (it already was)"
    return web.json_response({"message": f"trainjob {ns}/{name} {past}{note}"})


# --- assembly ------------------------------------------------------------------------------


def build_app(jc: JobClient, config: DashboardConfig, guard: Guard) -> web.Application:
    app = web.Application(middlewares=[guard.middleware])
    app[CLIENT] = jc
    app[CONFIG] = config
    app[GUARD] = guard

    async def start_hub(app: web.Application) -> None:
        hub = Hub(jc, asyncio.get_running_loop())
        app[HUB] = hub
        hub.start()

    app.on_startup.append(start_hub)
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    app.router.add_get("/api/session", session)
    app.router.add_get("/api/trainjobs/stream", jobs_stream)
    app.router.add_get("/api/runtimes", runtimes)
    app.router.add_get("/api/trainjobs/{ns}/{name}", job_detail)
    app.router.add_get("/api/trainjobs/{ns}/{name}/stream", job_stream)
    app.router.add_get("/api/trainjobs/{ns}/{name}/metrics", job_metrics)
    app.router.add_get("/api/trainjobs/{ns}/{name}/logs", job_logs)
    app.router.add_post("/api/trainjobs/{ns}/{name}/{action}", action)
    app.router.add_get("/api/experiments/stream", experiments_stream)
    app.router.add_get("/api/experiments/{ns}/{name}", experiment_detail)
    app.router.add_get("/api/experiments/{ns}/{name}/stream", experiment_stream)
    return app


def _bind(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise ClientError(
            f"--address {address} --port {port}: cannot listen there: {exc.strerror}"
        ) from None
    sock.listen(128)
    return sock


def _hosts(address: str, port: int) -> frozenset[str]:
    shown = f"[{address}]" if ":" in address else address
    names = {f"{shown}:{port}"}
    if address in ("127.0.0.1", "::1", "localhost"):
        names |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    if address in ("0.0.0.0", "::"):
        # Listening everywhere: any name for this machine may be used; the token still guards.
        names |= {f"{socket.gethostname()}:{port}", f"127.0.0.1:{port}", f"localhost:{port}"}
        names |= {f"{ip}:{port}" for ip in _local_addresses()}
    return frozenset(names)


def _local_addresses() -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


def serve(jc: JobClient, config: DashboardConfig, on_ready: Callable[[str], None]) -> None:
    """Serve until interrupted; ``on_ready`` gets the URL with the token once listening."""
    sock = _bind(config.address, config.port)
    port = int(sock.getsockname()[1])
    guard = Guard(hosts=_hosts(config.address, port), cookie=f"{COOKIE}_{port}")
    app = build_app(jc, config, guard)
    shown = f"[{config.address}]" if ":" in config.address else config.address
    if config.address in ("0.0.0.0", "::"):
        shown = "127.0.0.1"

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.SockSite(runner, sock, shutdown_timeout=1.0)
        await site.start()
        on_ready(f"http://{shown}:{port}/?token={guard.token}")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
