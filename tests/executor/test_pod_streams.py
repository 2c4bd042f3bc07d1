"""``kubectl exec``, ``kubectl port-forward`` and the Python client's ``stream()`` into pods
the engine runs: the streaming subresources end to end, on the pod network where this
machine has one (the ``plane`` fixture) and on the host's network (``host_plane``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from plane_helpers import Plane, make_jobset

from kubetrain.local.executor.kubeapi import JOBSETS
from kubetrain.local.executor.streams import PodStreams

pytestmark = pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning")

# The pod: a small HTTP server on 8080 of every interface, answering with its hostname, then
# nothing but waiting (until the test deletes it).
SERVER = (
    "import http.server, socket\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = ('hello from ' + socket.gethostname()).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *a): pass\n"
    "http.server.ThreadingHTTPServer(('', 8080), H).serve_forever()\n"
)


async def _kubectl(plane: Plane, *args: str, stdin: bytes = b"", timeout: float = 30) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), *args,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _running_pod(plane: Plane, name: str) -> dict[str, Any]:
    js = make_jobset(name, ["python", "-c", SERVER], pods=1)
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0].update(workingDir="/tmp", env=[{"name": "GREETING", "value": "hi"}])
    await plane.api.create(JOBSETS, js)

    async def running() -> dict[str, Any] | None:
        pods = await plane.pods(name)
        if pods and (pods[0].get("status") or {}).get("phase") == "Running":
            return pods[0]
        return None

    pod: dict[str, Any] = await plane.wait_for(running, 30)
    return pod


@pytest.fixture
async def served(plane: Plane) -> AsyncIterator[tuple[Plane, str]]:
    """The plane with the kubelet's streams registered, as the daemon does, and one pod."""
    plane.server.serve_pod_streams(PodStreams(plane.executor.kubelet))
    plane.server.write_kubeconfig(plane.home / "kubeconfig")
    pod = await _running_pod(plane, "streams")
    yield plane, pod["metadata"]["name"]


async def test_exec_runs_in_the_container_with_its_env_and_working_dir(
    served: tuple[Plane, str],
) -> None:
    plane, pod = served
    script = "echo $HOSTNAME $GREETING; uname -n; pwd"
    code, out, err = await _kubectl(plane, "exec", pod, "--", "sh", "-c", script)
    assert (code, err) == (0, "")
    # JobSet pods are named <jobset>-<job>-<index>-<suffix>; their hostname drops the suffix.
    hostname = pod.rsplit("-", 1)[0]
    assert out == f"{hostname} hi\n{hostname}\n/tmp\n"


async def test_exec_propagates_the_exit_code(served: tuple[Plane, str]) -> None:
    plane, pod = served
    code, out, err = await _kubectl(plane, "exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (code, out) == (3, "out\n")
    assert "err\n" in err and "command terminated with exit code 3" in err


async def test_exec_with_stdin(served: tuple[Plane, str]) -> None:
    plane, pod = served
    code, out, _ = await _kubectl(plane, "exec", "-i", pod, "--", "sh", "-c", "tr a-z A-Z", stdin=b"shout\n")
    assert (code, out) == (0, "SHOUT\n")


async def test_exec_with_a_terminal(served: tuple[Plane, str]) -> None:
    plane, pod = served
    master, slave = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), "exec", "-it", pod, "--", "sh",
        stdin=slave, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    os.write(master, b"tty; echo $((6*7)); exit 4\n")
    seen = b""
    loop = asyncio.get_running_loop()
    while True:
        try:
            chunk = await asyncio.wait_for(loop.run_in_executor(None, os.read, master, 4096), 30)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert await asyncio.wait_for(proc.wait(), 30) == 4, seen
    assert b"/dev/pts/" in seen and b"42" in seen


async def test_port_forward_reaches_the_pods_server(served: tuple[Plane, str]) -> None:
    plane, pod = served
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), "port-forward", f"pod/{pod}",
        f"{local}:8080", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert b"Forwarding from 127.0.0.1" in line
        for _ in range(2):  # two connections through one forward
            reader, writer = await asyncio.open_connection("127.0.0.1", local)
            writer.write(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            reply = await asyncio.wait_for(reader.read(), 30)
            writer.close()
            assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(f"hello from {pod}".encode())
    finally:
        proc.kill()
        await proc.wait()
