"""The TrainJobStatus server: training code POSTs progress and metrics, it lands in the TrainJob status.

Upstream's wire protocol (trainer v2.3.0 pkg/statusserver/): ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/
{ns}/trainjobs/{name}/status`` over HTTPS with a bearer token whose audience is exactly that
path (without the leading slash); the body is ``{"trainerStatus": {...}}`` and is written by
server-side apply to the ``status`` subresource with field manager ``trainer-status``.

One server serves both engines. Who may write is decided by a ``TokenVerifier``: on a cluster
and in the local engine alike it asks the API server (TokenReview), so tokens minted for one
TrainJob's audience are refused for every other TrainJob. kubetrain is stricter than upstream in
two places, both refusing requests upstream would pass on to the API server: the body must be
``application/json`` (415 otherwise), and a TrainJob that reports faster than
``min_interval_s`` gets 429 instead of another write. Unknown fields inside ``trainerStatus``
are dropped before the write, as upstream's typed decoding drops them, so a newer client that
sends more than this server knows still gets its known fields through.

Everything is refused before the API server is touched: a refused request writes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from aiohttp import web

from kubetrain.api import TRAINER_API_VERSION
from kubetrain.api.access import list_at, obj_at
from kubetrain.api.meta import failure_status
from kubetrain.api.schema import validate_object
from kubetrain.api.types import Obj
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient

__all__ = [
    "FIELD_MANAGER",
    "MAX_BODY_BYTES",
    "READ_TIMEOUT_S",
    "Accepted",
    "StatusServer",
    "TokenReviewVerifier",
    "TokenVerifier",
    "status_audience",
    "trainer_status_errors",
]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
FIELD_MANAGER = "trainer-status"
# Upstream's server read timeout: a client that trickles its body is cut off.
READ_TIMEOUT_S = 10.0
_TRAINER_STATUS_FIELDS = (
    "progressPercentage",
    "estimatedRemainingSeconds",
    "metrics",
    "lastUpdatedTime",
)
_ROUTE = re.compile(
    r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/(?P<ns>[^/]+)/trainjobs/(?P<name>[^/]+)/status$"
)
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
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

    Refused answers are cached for ``refusal_cache_s``, keyed by a hash of the token and the
    audience, so a flood of bad tokens cannot turn into a flood of reviews (bounded).
    Accepted ones are not cached unless ``cache_s`` says so: a token is good only while the
    pod it is bound to exists, and a cached yes would let a deleted pod's token write a
    same-named new job's status. Reports are paced per TrainJob (``min_interval_s``), so a
    review per report stays cheap.
    """

    client: KubeClient
    cache_s: float = 0.0
    refusal_cache_s: float = 5.0
    max_entries: int = 10_000
    _cache: dict[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)
    _pending: dict[tuple[str, str], asyncio.Future[bool]] = field(default_factory=dict)

    async def verify(self, token: str, *, audience: str, namespace: str) -> bool:
        key = (hashlib.sha256(token.encode()).hexdigest(), audience)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        # One review per token at a time: concurrent reports with the same token wait for it.
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            ok = await self._review(token, audience, namespace)
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved here, so no "never retrieved" warning without waiters
            raise
        else:
            future.set_result(ok)
        finally:
            del self._pending[key]
        if len(self._cache) >= self.max_entries:
            self._cache.clear()
        ttl = self.cache_s if ok else self.refusal_cache_s
        if ttl > 0:
            self._cache[key] = (now + ttl, ok)
        return ok

    async def _review(self, token: str, audience: str, namespace: str) -> bool:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        try:
            answer = await self.client.create("authentication.k8s.io/v1", "tokenreviews", review)
        except ApiError as err:
            log.warning("TokenReview refused: %s", err)
            return False
        status = obj_at(answer, "status")
        user = obj_at(status, "user")
        username = str(user.get("username") or "")
        # Service-account tokens name their namespace: system:serviceaccount:<ns>:<sa>
        # (upstream compares the token's kubernetes.io namespace claim; same fact).
        parts = username.split(":")
        in_namespace = (
            len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and parts[2] == namespace
        )
        return (
            bool(status.get("authenticated"))
            and audience in list_at(status, "audiences")
            and in_namespace
        )


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(failure_status(code, reason, message), status=code)


def trainer_status_errors(trainer_status: Any) -> list[str]:
    """Schema errors of a ``trainerStatus`` value, from the project's TrainJob CRD (one rule source)."""
    probe: Obj = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "probe"},
        "spec": {"runtimeRef": {"name": "probe"}},
        "status": {"trainerStatus": trainer_status},
    }
    errors = [
        str(e)
        for e in validate_object(probe, strict=False)
        if e.path.startswith("status.trainerStatus")
    ]
    stamp = trainer_status.get("lastUpdatedTime") if isinstance(trainer_status, dict) else None
    if isinstance(stamp, str) and not _is_rfc3339(stamp):
        # Upstream decodes it into a metav1.Time: anything but RFC 3339 fails there.
        errors.append(
            f"status.trainerStatus.lastUpdatedTime: Invalid value: {stamp[:40]!r}: not an RFC 3339 date-time"
        )
    if isinstance(trainer_status, dict) and "lastUpdatedTime" not in trainer_status:
        # The CRD's CEL rule on trainerStatus (enforced by the API server upstream).
        errors.append(
            "status.trainerStatus: Invalid value: lastUpdatedTime is required when trainerStatus is present"
        )
    return errors


def _is_rfc3339(text: str) -> bool:
    if _RFC3339.match(text) is None:
        return False
    try:
        datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _known_fields(trainer_status: Obj) -> Obj:
    kept = {k: trainer_status[k] for k in _TRAINER_STATUS_FIELDS if k in trainer_status}
    if isinstance(kept.get("metrics"), list):
        kept["metrics"] = [
            {k: m[k] for k in ("name", "value") if k in m} if isinstance(m, dict) else m
            for m in kept["metrics"]
        ]
    return kept


Accepted = Callable[[str, str, str, Obj], Awaitable[None] | None]
"""``on_accepted(namespace, name, uid, trainer_status)``: called after each successful write."""


class StatusServer:
    """An aiohttp application serving the TrainJobStatus route.

    ``on_accepted`` is called after every successful write (the local engine keeps the metrics
    history with it); its failures are logged, never turned into an error for the client,
    whose report is already in the status. At most ``max_in_flight`` reports are handled at
    once; more get 429 at once rather than queueing behind a slow API server.
    """

    def __init__(
        self,
        client: KubeClient,
        verifier: TokenVerifier,
        *,
        on_accepted: Accepted | None = None,
        min_interval_s: float = 0.2,
        max_in_flight: int = 64,
    ) -> None:
        self._client = client
        self._verifier = verifier
        self._on_accepted = on_accepted
        self._min_interval_s = min_interval_s
        self._max_in_flight = max_in_flight
        self._in_flight = 0
        self._last_write: dict[tuple[str, str], float] = {}
        self.accepted = 0
        self.refused = 0
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Serve on ``host:port`` (0 picks a free port); returns the port."""
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=ssl_context)
        await site.start()
        server = getattr(site, "_server", None)  # aiohttp keeps the bound server private
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._in_flight >= self._max_in_flight:
            self.refused += 1
            return _status(429, "TooManyRequests", "too many status updates in flight")
        self._in_flight += 1
        try:
            response = await self._serve(request)
        except Exception:  # upstream's panic recovery: one bad request never takes the server down
            log.exception("status server: %s %s", request.method, request.path)
            response = _status(500, "InternalError", "Internal Server Error")
        finally:
            self._in_flight -= 1
        if response.status == 200:
            self.accepted += 1
        else:
            self.refused += 1
        return response

    async def _serve(self, request: web.Request) -> web.Response:
        match = _ROUTE.match(request.path)
        if request.method != "POST" or match is None:
            return _status(404, "NotFound", "Not found")
        namespace, name = match["ns"], match["name"]
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return _status(413, "RequestEntityTooLarge", "Payload too large")

        # Who is asking is settled before the body is read, as upstream does.
        bearer = _BEARER.match(request.headers.get("Authorization", ""))
        if bearer is None or not await self._verifier.verify(
            bearer["token"], audience=status_audience(namespace, name), namespace=namespace
        ):
            return _status(403, "Forbidden", "Forbidden")

        if request.content_type != "application/json":
            return _status(415, "UnsupportedMediaType", "Content-Type must be application/json")
        try:
            raw = await asyncio.wait_for(request.read(), READ_TIMEOUT_S)
            payload = json.loads(raw)
        except web.HTTPRequestEntityTooLarge:
            return _status(413, "RequestEntityTooLarge", "Payload too large")
        except TimeoutError:
            return _status(408, "Timeout", "request body not received in time")
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
        trainer_status = _known_fields(trainer_status)

        key = (namespace, name)
        now = time.monotonic()
        if now - self._last_write.get(key, -1e9) < self._min_interval_s:
            return _status(
                429, "TooManyRequests", "status updates for this TrainJob are too frequent"
            )
        if len(self._last_write) >= 10_000:
            # Keep the throttle table bounded: forget jobs quiet for longer than the interval.
            self._last_write = {
                k: t for k, t in self._last_write.items() if now - t < self._min_interval_s
            }
        self._last_write[key] = now

        body: Obj = {
            "apiVersion": TRAINER_API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"trainerStatus": trainer_status},
        }
        try:
            written = await self._client.apply(
                "trainjobs", body, field_manager=FIELD_MANAGER, force=True, subresource="status"
            )
        except ApiError as err:
            if err.not_found:
                return _status(404, "NotFound", "Train job not found")
            if err.code in (400, 422):
                return _status(422, "Invalid", err.message)
            return _status(500, "InternalError", "Internal error")
        except TRANSPORT_ERRORS as err:
            log.warning("status server: writing %s/%s: %s", namespace, name, err)
            return _status(500, "InternalError", "Internal error")
        await self._accepted(namespace, name, written, trainer_status)
        return web.json_response({**payload, "trainerStatus": trainer_status})

    async def _accepted(self, namespace: str, name: str, written: Obj, trainer_status: Obj) -> None:
        if self._on_accepted is None:
            return
        uid = str(obj_at(written, "metadata").get("uid") or "")
        try:
            result = self._on_accepted(namespace, name, uid, trainer_status)
            if inspect.isawaitable(result):
                await result
        except Exception as err:  # the write succeeded; only the local history misses it
            log.warning(
                "status server: recording the report of %s/%s failed: %s: %s",
                namespace, name, type(err).__name__, err,
            )  # fmt: skip
