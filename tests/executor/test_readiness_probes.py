"""Readiness probes on the local engine: a pod is Ready only once its containers' probes
(httpGet, tcpSocket, exec) succeed, and stays not Ready while one fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from plane_helpers import PY, Plane, fast_settings, make_jobset, running_plane

from kubetrain.kube.kinds import JOBSET
from kubetrain.local.frameworks.datacache import with_datacache_images
from kubetrain.local.sandbox import ImageMap

# Answers /ready with 503 for its first second, then 200; runs until stopped.
SERVER = """
import http.server, socket, time
began = time.monotonic()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/ready" and time.monotonic() - began > 1.0
        self.send_response(200 if ok else 503); self.end_headers()
    def log_message(self, *a): pass
host = socket.gethostbyname(socket.gethostname())
http.server.HTTPServer((host, 8080), H).serve_forever()
"""

PROBE_CLIENT = (
    "import socket, urllib.request; "
    "urllib.request.urlopen('http://%s:8080/ready' % socket.gethostbyname(socket.gethostname()), "
    "timeout=2)"
)


def server_jobset(name: str, probe: dict[str, Any]) -> dict[str, Any]:
    js = make_jobset(name, [PY, "-c", SERVER], pods=1)
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0]["readinessProbe"] = {"periodSeconds": 1, **probe}
    pod_spec["containers"][0]["ports"] = [{"name": "web", "containerPort": 8080}]
    return js


def ready(pod: dict[str, Any]) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c["status"])
    return ""


@pytest.mark.parametrize(
    "probe",
    [
        pytest.param({"httpGet": {"path": "/ready", "port": "web"}}, id="httpGet on a named port"),
        pytest.param({"tcpSocket": {"port": 8080}}, id="tcpSocket"),
        pytest.param({"exec": {"command": [PY, "-c", PROBE_CLIENT]}}, id="exec in the container"),
    ],
)
async def test_a_pod_turns_ready_when_its_probe_succeeds(
    plane: Plane, probe: dict[str, Any]
) -> None:
    await plane.api.create(JOBSET.api_version, JOBSET.plural, server_jobset("probed", probe))

    async def ready_pod() -> dict[str, Any] | None:
        pods = await plane.pods("probed")
        return pods[0] if pods and ready(pods[0]) == "True" else None

    pod = await plane.wait_for(ready_pod, timeout=60)
    assert pod["status"]["containerStatuses"][0]["ready"] is True


async def test_a_failing_probe_keeps_a_running_pod_not_ready(plane: Plane) -> None:
    # Port 9 (discard) has no listener in the pod: every probe fails.
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, server_jobset("unready", {"tcpSocket": {"port": 9}})
    )

    async def unhealthy() -> bool:
        return any(
            e.get("reason") == "Unhealthy" and e["involvedObject"]["name"].startswith("unready")
            for e in await plane.events()
        )

    await plane.wait_for(unhealthy, timeout=60)
    pod = (await plane.pods("unready"))[0]
    assert pod["status"]["phase"] == "Running"
    assert ready(pod) == "False"
    assert pod["status"]["containerStatuses"][0]["ready"] is False


@pytest.fixture
async def cache_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine with the data-cache image mapped, as the daemon maps it."""
    settings = fast_settings(tmp_path, images=with_datacache_images(ImageMap()))
    async with running_plane(tmp_path, settings) as plane:
        yield plane


async def test_the_data_cache_image_runs_kubetrains_cache_worker_not_ready_until_loaded(
    cache_plane: Plane,
) -> None:
    # What the cache initializer gives a worker; with no head to load it, /ready says 503.
    js = server_jobset("cache", {"httpGet": {"path": "/ready", "port": 8080}})
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    container.update(
        image="ghcr.io/kubeflow/trainer/data-cache:v2.3.0",
        command=["worker"],
        args=["0.0.0.0", "50051"],
        env=[
            {"name": "METADATA_LOC", "value": "s3://b/t/metadata/v1.metadata.json"},
            {"name": "SCHEMA_NAME", "value": "reviews"},
            {"name": "TABLE_NAME", "value": "train"},
        ],
    )
    await cache_plane.api.create(JOBSET.api_version, JOBSET.plural, js)

    def logs() -> str:
        return "".join(p.read_text() for p in (cache_plane.home / "logs").rglob("*.log"))

    async def serving_unready() -> bool:
        started = "cache worker for reviews.train on grpc://0.0.0.0:50051" in logs()
        return started and any(e.get("reason") == "Unhealthy" for e in await cache_plane.events())

    await cache_plane.wait_for(serving_unready, timeout=90)
    await asyncio.sleep(3)  # three more probe periods, each answered 503
    pod = (await cache_plane.pods("cache"))[0]
    assert (pod["status"]["phase"], ready(pod)) == ("Running", "False")
