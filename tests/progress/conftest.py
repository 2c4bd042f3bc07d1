"""Fixtures: the embedded API server with TokenRequest/TokenReview, and the status server over HTTPS.

``plane`` is what the local daemon runs for progress reports, assembled in the test's event
loop: the real embedded API server (https, bearer token, the project's CRDs), the token
authority answering TokenRequest and TokenReview on it, a TrainJob and a pod of it stored
there, and the real ``StatusServer`` serving TLS with a certificate from ``ensure_serving_cert``,
verifying tokens through TokenReview and keeping the metrics history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from progress_plane import Plane

from kubetrain.controller.pki import ensure_serving_cert, service_dns_names
from kubetrain.controller.statusserver import StatusServer, TokenReviewVerifier
from kubetrain.kube.client import connect
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.history import HISTORY_FILE, MetricsHistory
from kubetrain.local.tokens import TokenAuthority


@pytest.fixture(scope="session")
def crds() -> list[dict[str, Any]]:
    from kubetrain.api.schema import crd_manifests

    return crd_manifests(descriptions=False)


@pytest.fixture
async def plane(tmp_path: Path, crds: list[dict[str, Any]]) -> AsyncIterator[Plane]:
    from kubetrain.runtime.defaults import default_runtimes

    home = tmp_path / "home"
    # Wired as the daemon wires it: routes into the server, then the server's reader back in.
    authority = TokenAuthority.for_home(home)
    server = ApiServer(
        home, crds=crds, seed_objects=default_runtimes, in_memory=True, routes=authority.routes()
    )
    authority.attach(server.reader)
    await server.start()
    kube = connect(server.kubeconfig())
    history = MetricsHistory(home / HISTORY_FILE)
    cert = ensure_serving_cert(
        home / "status-pki",
        service_dns_names("kubeflow-trainer-controller-manager", "kubeflow-system"),
        ["127.0.0.1"],
    )
    status = StatusServer(
        kube,
        TokenReviewVerifier(kube),
        on_accepted=lambda ns, name, uid, ts: history.record(ns, name, uid, ts),
    )
    port = await status.start("127.0.0.1", 0, cert.server_context())
    ca_file = home / "status-pki" / "ca.crt"
    try:
        yield Plane(
            server, kube, status, f"https://127.0.0.1:{port}", ca_file, history, home, authority
        )
    finally:
        await status.stop()
        history.close()
        await kube.close()
        await server.close()
