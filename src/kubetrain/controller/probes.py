"""Health, readiness and Prometheus metrics over plain HTTP, for ``kubetrain controller``.

``/healthz`` answers as long as the event loop runs; ``/readyz`` once the caches are synced and
this replica reconciles (a follower in leader election is alive but not ready, which keeps it
out of nothing: no Service routes to the controller, probes only restart wedged processes);
``/metrics`` serves ``ControllerMetrics`` in Prometheus' text format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from kubetrain.controller.manager import Controller

__all__ = ["probe_app", "serve_probes"]


def probe_app(controller: Controller) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        if controller.ready.is_set():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced or not the leader")

    async def metrics(_request: web.Request) -> web.Response:
        text = controller.metrics.prometheus(queue_depth=len(controller.queue))
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def serve_probes(controller: Controller, host: str, port: int) -> web.AppRunner:
    """Start the probe server; the caller stops it with ``await runner.cleanup()``."""
    runner = web.AppRunner(probe_app(controller), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
