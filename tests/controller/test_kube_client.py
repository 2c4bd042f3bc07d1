"""The controller's REST client: kubeconfig credentials, renewal after a 401, proxies, errors.

A small aiohttp server stands in for an API server that accepts exactly one credential at a
time, so each test shows which header the client sent and when it fetched a new one.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubetrain.kube.client import (
    TRANSPORT_ERRORS,
    ApiError,
    KubeClient,
    _proxy_for,
    connect,
)

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


@dataclass
class FakeApiServer:
    """Answers GET /api/v1/namespaces/default when the Authorization header is ``accepted``."""

    accepted: str
    url: str = ""
    seen: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        self.seen.append(header)
        if header != self.accepted:
            status = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "no"}
            return web.json_response(status, status=401)
        if request.path == "/api/v1/namespaces/default":
            return web.json_response(NAMESPACE)
        if request.path == "/api/v1/configmaps":  # a watch: two events, then the stream ends
            response = web.StreamResponse()
            await response.prepare(request)
            for name in ("a", "b"):
                event = {"type": "ADDED", "object": {"metadata": {"name": name}}}
                await response.write(json.dumps(event).encode() + b"\n")
            return response
        status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not here"}
        return web.json_response(status, status=404)


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(accepted="")
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


def kubeconfig(server: str, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }


async def get_namespace(client: KubeClient) -> dict[str, Any]:
    try:
        return await client.get("v1", "namespaces", "default")
    finally:
        await client.close()


async def test_a_static_token_is_sent_as_a_bearer_header(fake: FakeApiServer) -> None:
    fake.accepted = "Bearer t0ken"
    client = connect(kubeconfig(fake.url, {"token": "t0ken"}))
    assert client.default_namespace == "ns"
    assert await get_namespace(client) == NAMESPACE


async def test_basic_credentials_are_sent_as_a_basic_header(fake: FakeApiServer) -> None:
    fake.accepted = "Basic " + base64.b64encode(b"alice:secret").decode()
    client = connect(kubeconfig(fake.url, {"username": "alice", "password": "secret"}))
    assert await get_namespace(client) == NAMESPACE


async def test_a_rotated_token_file_is_read_again_after_a_401(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    # In a pod the kubelet rotates the service-account token file under a running controller.
    token = tmp_path / "token"
    token.write_text("old\n")
    fake.accepted = "Bearer old"
    client = connect(kubeconfig(fake.url, {"tokenFile": str(token)}))
    try:
        await client.get("v1", "namespaces", "default")
        token.write_text("new\n")
        fake.accepted = "Bearer new"
        assert await client.get("v1", "namespaces", "default") == NAMESPACE
    finally:
        await client.close()
    assert fake.seen == ["Bearer old", "Bearer old", "Bearer new"]


async def test_an_unreadable_token_file_is_a_transport_error_callers_retry(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    client = connect(kubeconfig(fake.url, {"tokenFile": str(tmp_path / "missing")}))
    with pytest.raises(TRANSPORT_ERRORS, match=r"reading token file .*missing"):
        await get_namespace(client)
    assert fake.seen == [], "nothing is sent without the credential"


async def test_an_exec_plugin_credential_is_used_and_fetched_again_after_a_401(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    counter = tmp_path / "calls"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',"
        " 'kind': 'ExecCredential', 'status': {'token': f'exec-{n}'}}))\n"
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
        }
    }
    fake.accepted = "Bearer exec-1"
    client = connect(kubeconfig(fake.url, user))
    try:
        await client.get("v1", "namespaces", "default")
        fake.accepted = "Bearer exec-2"  # the first credential expired
        assert await client.get("v1", "namespaces", "default") == NAMESPACE
    finally:
        await client.close()
    assert fake.seen == ["Bearer exec-1", "Bearer exec-1", "Bearer exec-2"]


async def test_a_refused_credential_is_an_api_error_with_the_servers_status(
    fake: FakeApiServer,
) -> None:
    fake.accepted = "Bearer right"
    client = connect(kubeconfig(fake.url, {"token": "wrong"}))
    with pytest.raises(ApiError) as caught:
        await get_namespace(client)
    assert (caught.value.code, caught.value.reason) == (401, "Unauthorized")
    assert fake.seen == ["Bearer wrong"], "a static token is not retried"


async def test_a_watch_yields_each_line_as_an_event(fake: FakeApiServer) -> None:
    client = connect(kubeconfig(fake.url, {}))
    try:
        events = [
            (kind, obj["metadata"]["name"]) async for kind, obj in client.watch("v1", "configmaps")
        ]
    finally:
        await client.close()
    assert events == [("ADDED", "a"), ("ADDED", "b")]


async def test_a_closed_client_refuses_requests(fake: FakeApiServer) -> None:
    client = connect(kubeconfig(fake.url, {}))
    await client.close()
    with pytest.raises(RuntimeError, match="closed"):
        await client.get("v1", "namespaces", "default")


@pytest.mark.parametrize(
    ("environment", "server", "proxy"),
    [
        ({}, "https://api.example.com:6443", None),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.example.com:6443", "http://proxy:3128"),
        (
            {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com"},
            "https://api.example.com:6443",
            None,
        ),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "http://127.0.0.1:8080", None),
    ],
    ids=[
        "no proxy variables: direct",
        "HTTPS_PROXY: through the proxy",
        "NO_PROXY naming the server's domain: direct",
        "an http server is not sent to the HTTPS proxy",
    ],
)
def test_the_proxy_comes_from_the_environment_as_kubectl_reads_it(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], server: str, proxy: str | None
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert _proxy_for(server) == proxy


def test_a_serving_process_runs_on_uvloop_where_it_is_installed() -> None:
    import asyncio

    from kubetrain.kube.eventloop import run

    pytest.importorskip("uvloop", reason="uvloop is not installed (no build for this platform)")

    async def loop_module() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert run(loop_module()).startswith("uvloop")


@pytest.mark.parametrize(
    ("holds_objects", "young", "frozen"),
    [
        pytest.param(True, 50_000, True, id="a process holding API objects collects them rarely"),
        pytest.param(False, 700, False, id="any other process keeps CPython's collector"),
    ],
)
def test_the_garbage_collector_of_a_process_that_holds_objects(
    holds_objects: bool, young: int, frozen: bool
) -> None:
    # In a process of its own: the collector's settings are the whole interpreter's.
    script = (
        "import gc\n"
        "from kubetrain.kube.eventloop import run\n"
        "async def settings():\n"
        "    return gc.get_threshold()[0], gc.get_freeze_count() > 0\n"
        f"print(*run(settings(), holds_objects={holds_objects}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == [str(young), str(frozen)]
