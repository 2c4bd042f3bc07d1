"""Helpers for the cluster tests: HTTPS clients that trust a test CA, and a tiny TokenReview
authority. The embedded API server's admission is ``kubetrain.runtime.admission.TrainerAdmission``,
the same rules the webhook server applies."""

from __future__ import annotations

import asyncio
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from lightkube.config.kubeconfig import KubeConfig

from kubetrain.controller.cluster import ControllerConfig
from kubetrain.kube.client import ApiError, KubeClient, connect
from kubetrain.local.apiserver import ApiServer

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"


def client_for(server: ApiServer) -> KubeClient:
    return connect(KubeConfig.from_dict(server.kubeconfig()))


@asynccontextmanager
async def embedded_server(
    tmp_path: Path, crds: list[Obj], **options: Any
) -> AsyncIterator[ApiServer]:
    """The embedded API server with kubetrain's CRDs, admission and default runtimes, as a
    cluster with kubetrain installed serves them; ``options`` add to (or replace) those."""
    from kubetrain.runtime.admission import TrainerAdmission
    from kubetrain.runtime.defaults import default_runtimes

    server = ApiServer(
        tmp_path / "home",
        **{
            "crds": crds,
            "admission": TrainerAdmission(),
            "seed_objects": default_runtimes,
            "in_memory": True,
            "bookmark_interval": 0.5,
            **options,
        },
    )
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def controller_config(tmp_path: Path) -> ControllerConfig:
    """The cluster controller on loopback, every port picked by the system, and leader
    election and CA refresh fast enough for a test."""
    return ControllerConfig(
        namespace="default",
        webhook_host="127.0.0.1",
        webhook_port=0,
        status_port=0,
        metrics_host="127.0.0.1",
        metrics_port=0,
        health_host="127.0.0.1",
        health_port=0,
        cert_dir=tmp_path / "certs",
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.5,
        ca_refresh_s=0.2,
    )


async def eventually(probe: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    """The first truthy answer of ``probe``, asked every 50 ms."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


def trusting(ca_pem: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem)
    context.check_hostname = False  # the certificate names the Service, the test dials 127.0.0.1
    return context


@dataclass
class Minted:
    username: str
    audiences: list[str]
    expires: float


@dataclass
class TokenAuthority:
    """Mints opaque tokens and answers TokenReview in kube-apiserver's shape, independently of
    kubetrain's own token code: ``TokenReviewVerifier`` is checked against this second
    implementation too (the embedded API server's TokenRequest/TokenReview is used in
    ``test_status_server_with_the_embedded_token_request_and_review``)."""

    tokens: dict[str, Minted] = field(default_factory=dict)
    reviews: int = 0

    def mint(self, namespace: str, audience: str, *, ttl: float = 3600, sa: str = "default") -> str:
        token = secrets.token_urlsafe(24)
        self.tokens[token] = Minted(
            f"system:serviceaccount:{namespace}:{sa}", [audience], time.time() + ttl
        )
        return token

    async def _review(self, request: web.Request) -> web.Response:
        self.reviews += 1
        body = await request.json()
        spec = body.get("spec") or {}
        minted = self.tokens.get(str(spec.get("token")))
        wanted = list(spec.get("audiences") or [])
        status: Obj = {"authenticated": False}
        if minted is None or minted.expires < time.time():
            status["error"] = "token has expired or is invalid"
        else:
            common = [a for a in wanted if a in minted.audiences] if wanted else minted.audiences
            if not common:
                status["error"] = "token audiences do not match"
            else:
                status = {
                    "authenticated": True,
                    "user": {"username": minted.username, "groups": ["system:serviceaccounts"]},
                    "audiences": common,
                }
        return web.json_response({**body, "status": status}, status=201)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._review)
        return app


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def kubeconfig_file(server: ApiServer, path: Path) -> Path:
    return server.write_kubeconfig(path)


async def loopback_controller_pod(kube: KubeClient, webhook_port: int) -> None:
    """What the executor would record for the controller's pod behind its Service: running on
    loopback, Ready, serving the webhooks on ``webhook_port`` (the API server calls them there)."""
    from kubetrain.controller.deploy import LABELS, NAMESPACE

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "controller-0", "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": {
            "containers": [
                {
                    "name": "manager",
                    "image": "kubetrain",
                    "ports": [{"name": "webhook-server", "containerPort": webhook_port}],
                }
            ]
        },
    }
    try:
        await kube.create("v1", "pods", pod)
    except ApiError as err:  # left by an earlier test on a shared server: this one replaces it
        if err.code != 409:
            raise
        await kube.delete("v1", "pods", "controller-0", namespace=NAMESPACE)
        await kube.create("v1", "pods", pod)
    ready = {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    await kube.patch(
        "v1", "pods", "controller-0", {"status": ready}, namespace=NAMESPACE, subresource="status"
    )
