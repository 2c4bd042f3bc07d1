"""The TrainJobStatus server: training code POSTs progress and metrics, it lands in the TrainJob status.

Upstream's wire protocol (reference §4): ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/
{ns}/trainjobs/{name}/status`` over HTTPS with a bearer token whose audience is exactly that
path (without the leading slash); the body is ``{"trainerStatus": {...}}`` and is written by
server-side apply to the ``status`` subresource with field manager ``trainer-status``.

One server serves both engines. Who may write is decided by a ``TokenVerifier``: on a cluster
and in the local engine alike it asks the API server (TokenReview), so tokens minted for one
TrainJob's audience are refused for every other TrainJob. kubetrain is stricter than upstream in
two places, both refusing requests upstream would pass on to the API server: the body must be
``application/json`` (415 otherwise), and a TrainJob that reports faster than
``min_interval_s`` gets 429 instead of another write.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from kubetrain.api import TRAINER_API_VERSION
from kubetrain.api.schema import validate_object
from kubetrain.api.types import Obj
from kubetrain.controller.kube import ApiError, KubeClient

__all__ = [
    "FIELD_MANAGER",
    "MAX_BODY_BYTES",
    "StatusServer",
    "TokenReviewVerifier",
    "TokenVerifier",
    "status_audience",
    "trainer_status_errors",
]

MAX_BODY_BYTES = 64 * 1024
FIELD_MANAGER = "trainer-status"
_ROUTE = re.compile(
    r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/(?P<ns>[^/]+)/trainjobs/(?P<name>[^/]+)/status$"
)
_BEARER = re.compile(r"^\s*bearer\s+(?P<token>\S+)\s*$", re.IGNORECASE)


def status_audience(namespace: str, name: str) -> str:
    """The audience a token must carry to report for this TrainJob (upstream's value)."""
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


class TokenVerifier(Protocol):
    async def verify(self, token: str, *, audience: str, namespace: str) -> bool:
        """True when ``token`` is valid now, for ``audience``, and belongs to ``namespace``."""
        ...


@dataclass
class TokenReviewVerifier:
    """Verifies tokens with the API server's TokenReview, as a cluster's kube-apiserver would.

    Accepted answers are cached briefly (keyed by a hash of the token) so a busy job costs one
    review per ``cache_s`` rather than one per report; refusals are not cached.
    """

    client: KubeClient
    cache_s: float = 30.0
    _cache: dict[tuple[str, str], float] = field(default_factory=dict)

    async def verify(self, token: str, *, audience: str, namespace: str) -> bool:
        key = (hashlib.sha256(token.encode()).hexdigest(), audience)
        now = time.monotonic()
        if self._cache.get(key, 0.0) > now:
            return True
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        try:
            answer = await self.client.create("authentication.k8s.io/v1", "tokenreviews", review)
        except ApiError:
            return False
        status = answer.get("status") or {}
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        # Service-account tokens name their namespace: system:serviceaccount:<ns>:<sa>.
        parts = username.split(":")
        in_namespace = len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and parts[2] == namespace
        ok = bool(status.get("authenticated")) and audience in (status.get("audiences") or []) and in_namespace
        if ok:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = now + self.cache_s
        return ok


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


def trainer_status_errors(trainer_status: Any) -> list[str]:
    """Schema errors of a ``trainerStatus`` value, from the project's TrainJob CRD (one rule source)."""
    probe: Obj = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "probe"},
        "spec": {"runtimeRef": {"name": "probe"}},
        "status": {"trainerStatus": trainer_status},
    }
    errors = [str(e) for e in validate_object(probe, strict=True) if e.path.startswith("status.trainerStatus")]
    if isinstance(trainer_status, dict) and "lastUpdatedTime" not in trainer_status:
        # The CRD's CEL rule on trainerStatus (enforced by the API server upstream).
        errors.append("status.trainerStatus: Invalid value: lastUpdatedTime is required when trainerStatus is present")
    return errors


Accepted = Callable[[str, str, Obj], Awaitable[None] | None]


class StatusServer:
    """An aiohttp application serving the TrainJobStatus route.

    ``on_accepted(namespace, name, trainer_status)`` is called after every successful write
    (the local engine keeps the metrics history with it).
    """

    def __init__(
        self,
        client: KubeClient,
        verifier: TokenVerifier,
        *,
        on_accepted: Accepted | None = None,
        min_interval_s: float = 0.2,
    ) -> None:
        self._client = client
        self._verifier = verifier
        self._on_accepted = on_accepted
        self._min_interval_s = min_interval_s
        self._last_write: dict[tuple[str, str], float] = {}
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Serve on ``host:port`` (0 picks a free port); returns the port."""
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]  # aiohttp keeps the bound server private
        return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        match = _ROUTE.match(request.path)
        if request.method != "POST" or match is None:
            return _status(404, "NotFound", "Not found")
        namespace, name = match["ns"], match["name"]
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return _status(413, "RequestEntityTooLarge", "Payload too large")

        bearer = _BEARER.match(request.headers.get("Authorization", ""))
        if bearer is None or not await self._verifier.verify(
            bearer["token"], audience=status_audience(namespace, name), namespace=namespace
        ):
            return _status(403, "Forbidden", "Forbidden")

        if request.content_type != "application/json":
            return _status(415, "UnsupportedMediaType", "Content-Type must be application/json")
        try:
            raw = await request.read()
            payload = json.loads(raw)
        except web.HTTPRequestEntityTooLarge:
            return _status(413, "RequestEntityTooLarge", "Payload too large")
        except (ValueError, UnicodeDecodeError):
            return _status(422, "Invalid", "Invalid payload")
        if not isinstance(payload, dict):
            return _status(422, "Invalid", "Invalid payload")
        if payload.get("trainerStatus") is None:
            return web.json_response(payload)
        trainer_status = payload["trainerStatus"]
        errors = trainer_status_errors(trainer_status)
        if errors:
            return _status(422, "Invalid", "; ".join(errors))

        key = (namespace, name)
        now = time.monotonic()
        if now - self._last_write.get(key, -1e9) < self._min_interval_s:
            return _status(429, "TooManyRequests", "status updates for this TrainJob are too frequent")
        self._last_write[key] = now

        body: Obj = {
            "apiVersion": TRAINER_API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"trainerStatus": trainer_status},
        }
        try:
            await self._client.apply("trainjobs", body, field_manager=FIELD_MANAGER, force=True, subresource="status")
        except ApiError as err:
            if err.not_found:
                return _status(404, "NotFound", "Train job not found")
            if err.code in (400, 422):
                return _status(422, "Invalid", err.message)
            return _status(500, "InternalError", "Internal error")
        if self._on_accepted is not None:
            result = self._on_accepted(namespace, name, trainer_status)
            if asyncio.iscoroutine(result):
                await result
        return web.json_response(payload)
