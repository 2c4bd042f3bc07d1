"""What other parts of kubetrain plug into the server: extra routes, more tokens, the reader."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from kubetrain.local.apiserver import ApiServer, ServerThread
from kubetrain.local.apiserver.rbac import MASTERS, User

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="embedded server only"
)

REVIEW = "/apis/authentication.k8s.io/v1/tokenreviews"


async def _review(request: web.Request) -> web.StreamResponse:
    return web.json_response({"kind": "TokenReview", "status": {"authenticated": True}}, status=201)


@pytest.mark.parametrize(
    ("token", "path", "code"),
    [
        (None, REVIEW, 401),
        ("admin", REVIEW, 201),
        ("pod-token", "/api/v1/namespaces", 200),
        ("other", "/api/v1/namespaces", 401),
    ],
    ids=[
        "an extra route sits behind the same auth",
        "an extra route answers with the admin token",
        "the authenticator admits further tokens",
        "tokens nobody knows are refused",
    ],
)
async def test_extra_routes_and_authenticator(
    tmp_path: Path, token: str | None, path: str, code: int
) -> None:
    server = ApiServer(
        tmp_path,
        in_memory=True,
        tls=False,
        token="admin",
        routes=[("POST", REVIEW, _review)],
        authenticator=lambda t: User("pod", (MASTERS,)) if t == "pod-token" else None,
    )
    await server.start()
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession(server.url, headers=headers) as http:
            method = http.post if path == REVIEW else http.get
            async with method(path, json={}) as response:
                assert response.status == code
        assert server.reader.get("v1", "Namespace", None, "kubeflow-system") is not None
    finally:
        await server.close()


def test_a_server_thread_serves_synchronous_callers(tmp_path: Path) -> None:
    with ServerThread(lambda: ApiServer(tmp_path, in_memory=True, tls=False, auth=False)) as server:
        import urllib.request

        with urllib.request.urlopen(f"{server.url}/version", timeout=5) as response:
            assert response.status == 200
        assert server.url.startswith("http://127.0.0.1:")


def test_a_thread_whose_server_cannot_listen_reports_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        thread = ServerThread(
            lambda: ApiServer(tmp_path, in_memory=True, tls=False, auth=False, port=port)
        )
        with pytest.raises(RuntimeError, match="failed to start"):
            thread.start()
        thread.stop()
