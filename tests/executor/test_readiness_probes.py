"""Readiness probes on the local engine: a pod is Ready only once its containers' probes
(httpGet, tcpSocket, exec) succeed, and stays not Ready while one fails."""

from __future__ import annotations

from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset

from kubetrain.local.executor.kubeapi import JOBSETS

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
    await plane.api.create(JOBSETS, server_jobset("probed", probe))

    async def ready_pod() -> dict[str, Any] | None:
        pods = await plane.pods("probed")
        return pods[0] if pods and ready(pods[0]) == "True" else None

    pod = await plane.wait_for(ready_pod, timeout=60)
    assert pod["status"]["containerStatuses"][0]["ready"] is True


async def test_a_failing_probe_keeps_a_running_pod_not_ready(plane: Plane) -> None:
    # Port 9 (discard) has no listener in the pod: every probe fails.
    await plane.api.create(JOBSETS, server_jobset("unready", {"tcpSocket": {"port": 9}}))

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
