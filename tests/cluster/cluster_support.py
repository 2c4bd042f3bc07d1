"""Helpers for the cluster tests: HTTPS clients that trust a test CA, and a tiny TokenReview
authority. The embedded API server's admission is ``kubetrain.runtime.admission.TrainerAdmission``,
the same rules the webhook server applies."""

from __future__ import annotations

import secrets
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from lightkube.config.kubeconfig import KubeConfig

from kubetrain.kube.client import ApiError, KubeClient, connect
from kubetrain.local.apiserver import ApiServer

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"


def client_for(server: ApiServer) -> KubeClient:
    return connect(KubeConfig.from_dict(server.kubeconfig()))


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
