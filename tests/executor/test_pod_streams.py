"""``kubectl exec``, ``kubectl port-forward`` and the Python client's ``stream()`` into pods
the engine runs: the streaming subresources end to end, on the pod network where this
machine has one (the ``plane`` fixture) and on the host's network (``host_plane``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import re
import socket
import struct
import subprocess
import termios
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from plane_helpers import Plane, make_jobset, running_plane

from kubetrain.kube.kinds import JOBSET, POD
from kubetrain.local.executor.settings import ExecutorSettings
from kubetrain.local.executor.streams import PodStreams

pytestmark = pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning")

# The pod: a small HTTP server on 8080 of every interface, answering with its hostname; it
# says "serving" once it listens, then "tick" twice a second (for attach). /big is 4 MiB.
SERVER = (
    "import http.server, socket\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = ('hello from ' + socket.gethostname()).encode()\n"
    "        if self.path == '/big': body = bytes(range(256)) * 16384\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *a): pass\n"
    "import os\n"
    "server = http.server.ThreadingHTTPServer(('', int(os.environ.get('PORT', '8080'))), H)\n"
    "print('serving', flush=True)\n"
    "import threading, time\n"
    "def tick():\n"
    "    while True: print('tick', flush=True); time.sleep(0.5)\n"
    "threading.Thread(target=tick, daemon=True).start()\n"
    "server.serve_forever()\n"
)


async def _kubectl(
    plane: Plane, *args: str, stdin: bytes = b"", timeout: float = 30, **env: str
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), *args,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _running_pod(
    plane: Plane, name: str, user: int | None = 1000, port: int = 8080
) -> dict[str, Any]:
    js = make_jobset(name, ["python", "-c", SERVER], pods=1)
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["containers"][0].update(
        workingDir="/tmp",
        env=[{"name": "GREETING", "value": "hi"}, {"name": "PORT", "value": str(port)}],
        securityContext={"runAsUser": user, "runAsGroup": user} if user is not None else {},
        resources={"limits": {"memory": "1Gi"}},
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)

    async def running() -> dict[str, Any] | None:
        pods = await plane.pods(name)
        if not pods or (pods[0].get("status") or {}).get("phase") != "Running":
            return None
        log = plane.home / "logs" / "default" / pods[0]["metadata"]["name"] / "node.log"
        return pods[0] if log.exists() and "serving" in log.read_text() else None

    pod: dict[str, Any] = await plane.wait_for(running, 30)
    return pod


@pytest.fixture
def streaming(plane: Plane) -> Plane:
    """The plane with the kubelet's streams registered, as the daemon does."""
    plane.server.serve_pod_streams(PodStreams(plane.executor.kubelet))
    plane.server.write_kubeconfig(plane.home / "kubeconfig")
    return plane


@pytest.fixture
async def served(streaming: Plane) -> AsyncIterator[tuple[Plane, str]]:
    """The streaming plane and one pod."""
    pod = await _running_pod(streaming, "streams")
    yield streaming, pod["metadata"]["name"]


async def test_exec_runs_in_the_container_with_its_env_and_working_dir(
    served: tuple[Plane, str],
) -> None:
    plane, pod = served
    script = "echo $HOSTNAME $GREETING; uname -n; pwd; id -u; id -g"
    code, out, err = await _kubectl(plane, "exec", pod, "--", "sh", "-c", script)
    assert (code, err) == (0, "")
    # JobSet pods are named <jobset>-<job>-<index>-<suffix>; their hostname drops the suffix.
    hostname = pod.rsplit("-", 1)[0]
    assert out == f"{hostname} hi\n{hostname}\n/tmp\n1000\n1000\n"


async def test_exec_propagates_the_exit_code(served: tuple[Plane, str]) -> None:
    plane, pod = served
    code, out, err = await _kubectl(
        plane, "exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3"
    )
    assert (code, out) == (3, "out\n")
    assert "err\n" in err and "command terminated with exit code 3" in err


async def test_kubectl_without_websockets_is_told_how_to_turn_them_on(
    served: tuple[Plane, str],
) -> None:
    plane, pod = served
    env = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    code, _, err = await _kubectl(plane, "exec", pod, "--", "true", **env)
    assert code == 1
    assert "KUBECTL_REMOTE_COMMAND_WEBSOCKETS" in err


async def test_attach_follows_the_containers_output(served: tuple[Plane, str]) -> None:
    plane, pod = served
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), "attach", pod,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"tick\n"
    finally:
        proc.kill()
        await proc.wait()


async def test_kubectl_run_i_sends_what_is_typed_and_its_end(streaming: Plane) -> None:
    # kubectl run -i makes the container with stdin and stdinOnce, waits for it to run and
    # attaches: the end of kubectl's input ends the container's, so tr ends and so does the pod.
    code, out, err = await _kubectl(
        streaming, "run", "shout", "-i", "--restart=Never", "--image=busybox", "--command",
        "--", "sh", "-c", "tr a-z A-Z", stdin=b"shout\n", timeout=60,
    )  # fmt: skip
    assert (code, out) == (0, "SHOUT\n"), err
    pod = await streaming.api.get(POD.api_version, POD.plural, "shout", namespace="default")
    (container,) = pod["spec"]["containers"]
    assert (container["stdin"], container["stdinOnce"]) == (True, True)
    assert pod["status"]["phase"] == "Succeeded"


async def test_kubectl_attach_i_reaches_a_container_with_stdin(streaming: Plane) -> None:
    script = 'while read -r l; do echo "got $l"; [ "$l" = bye ] && exit 0; done; exit 1'
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox", "command": ["sh", "-c", script], "stdin": True,
        }]},
    }  # fmt: skip
    await streaming.api.create(POD.api_version, POD.plural, pod)

    async def running() -> bool:
        got = await streaming.api.get(POD.api_version, POD.plural, "reader", namespace="default")
        return (got.get("status") or {}).get("phase") == "Running"

    await streaming.wait_for(running, 30)
    code, out, err = await _kubectl(streaming, "attach", "-i", "reader", stdin=b"hello\nbye\n")
    assert (code, out) == (0, "got hello\ngot bye\n"), err


async def test_kubectl_cp_both_ways(served: tuple[Plane, str], tmp_path: Path) -> None:
    plane, pod = served
    source = tmp_path / "weights.bin"
    source.write_bytes(bytes(range(256)) * 4096)
    # kubectl cp is tar over exec: -i with the end of stdin one way, stdout the other.
    code, _, err = await _kubectl(plane, "cp", str(source), f"{pod}:/tmp/weights.bin")
    assert code == 0, err
    back = tmp_path / "back.bin"
    code, _, err = await _kubectl(plane, "cp", f"{pod}:/tmp/weights.bin", str(back))
    assert code == 0, err
    assert back.read_bytes() == source.read_bytes()


async def test_exec_with_stdin(served: tuple[Plane, str]) -> None:
    plane, pod = served
    code, out, _ = await _kubectl(
        plane, "exec", "-i", pod, "--", "sh", "-c", "tr a-z A-Z", stdin=b"shout\n"
    )
    assert (code, out) == (0, "SHOUT\n")


async def _exec_on_terminal(plane: Plane, pod: str, typed: bytes) -> tuple[int, bytes]:
    """``kubectl exec -it <pod> -- sh`` on a 100x30 terminal of ours; what ``typed`` made it
    print, and its exit code."""
    return await _kubectl_on_terminal(plane, ["exec", "-it", pod, "--", "sh"], typed)


async def _kubectl_on_terminal(plane: Plane, args: list[str], typed: bytes) -> tuple[int, bytes]:
    """kubectl on a 100x30 terminal of ours; what ``typed`` made it print, its exit code."""
    master, slave = pty.openpty()
    # kubectl's terminal is 100x30: the container's terminal gets that size (resize channel).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), *args,
        stdin=slave, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    os.write(master, typed)
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
    return await asyncio.wait_for(proc.wait(), 30), seen


async def test_exec_with_a_terminal(served: tuple[Plane, str]) -> None:
    plane, pod = served
    code, seen = await _exec_on_terminal(plane, pod, b"tty; stty size; echo $((6*7)); exit 4\n")
    assert code == 4, seen
    assert b"/dev/pts/" in seen and b"30 100\r\n42\r\n" in seen


async def test_kubectl_run_it_gives_the_container_a_terminal(streaming: Plane) -> None:
    args = ["run", "term", "-it", "--restart=Never", "--image=busybox", "--command", "--", "sh"]
    code, seen = await _kubectl_on_terminal(streaming, args, b"tty -s && echo $((6*7)); exit 4\n")
    pod = await streaming.api.get(POD.api_version, POD.plural, "term", namespace="default")
    (container,) = pod["spec"]["containers"]
    assert (container["tty"], container["stdin"], container["stdinOnce"]) == (True, True, True)
    # Only the shell in the container computes 42 (the terminals echo the line as typed);
    # with restartPolicy Never kubectl waits for the container's exit code and returns it.
    assert b"42\r\n" in seen, seen
    assert code == 4, seen
    assert b"pod default/term terminated (Error)" in seen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _http_get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    reply = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    assert reply.startswith(b"HTTP/1.0 200")
    return reply.partition(b"\r\n\r\n")[2]


async def test_port_forward_reaches_the_pods_server(served: tuple[Plane, str]) -> None:
    plane, pod = served
    first, second = _free_port(), _free_port()
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), "port-forward", f"pod/{pod}",
        f"{first}:8080", f"{second}:8080", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        while f"127.0.0.1:{second}".encode() not in await asyncio.wait_for(
            proc.stdout.readline(), 30
        ):
            pass
        hello = f"hello from {pod.rsplit('-', 1)[0]}".encode()
        big = bytes(range(256)) * 16384  # more than any SPDY window or frame holds
        # Connections one after another, through both forwarded ports.
        assert await _http_get(first, "/") == hello
        assert await _http_get(second, "/big") == big
        assert await _http_get(second, "/") == hello
        # And side by side, multiplexed over the one connection kubectl holds.
        both = await asyncio.gather(_http_get(first, "/big"), _http_get(second, "/big"))
        assert both == [big, big]
    finally:
        proc.kill()
        await proc.wait()


async def test_port_forward_to_a_closed_port_says_why(served: tuple[Plane, str]) -> None:
    plane, pod = served
    # ":9999": kubectl picks a free local port itself and says which (no port chosen here
    # that another process could take first).
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(plane.home / "kubeconfig"),
        "--cache-dir", str(plane.home / "kubectl-cache"), "port-forward", f"pod/{pod}",
        ":9999", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        forwarding = await asyncio.wait_for(proc.stdout.readline(), 30)
        found = re.search(rb"127\.0\.0\.1:(\d+) ->", forwarding)
        assert found, (forwarding, await proc.stderr.read())
        local = int(found.group(1))
        reader, writer = await asyncio.open_connection("127.0.0.1", local)
        assert await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
        line = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert b"failed to connect to localhost:9999 inside the pod's network namespace" in line
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


@contextlib.contextmanager
def _core(plane: Plane) -> Iterator[Any]:
    """The official client's CoreV1Api on the plane's kubeconfig."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(plane.home / "kubeconfig"))
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


async def test_python_client_stream_exec(served: tuple[Plane, str]) -> None:
    from kubernetes.stream import stream

    plane, pod = served

    def run(core: Any) -> tuple[str, int | None]:
        ws = stream(
            core.connect_get_namespaced_pod_exec, pod, "default",
            command=["sh", "-c", "read line; echo got $line; exit 5"],
            stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False,
        )  # fmt: skip
        ws.write_stdin("hello\n")
        ws.run_forever(timeout=30)
        try:
            return ws.read_stdout(), ws.returncode
        finally:
            # websocket-client's close() skips closing the socket once the server has closed.
            ws.sock.shutdown()

    with _core(plane) as core:
        assert await asyncio.to_thread(run, core) == ("got hello\n", 5)


async def test_python_client_port_forward(served: tuple[Plane, str]) -> None:

    plane, pod = served
    with _core(plane) as core:
        reply = await asyncio.to_thread(_fetch_through_client, core, pod)
    assert reply.startswith(b"HTTP/1.0 200")
    assert reply.endswith(f"hello from {pod.rsplit('-', 1)[0]}".encode())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["missing"], 'Error from server (NotFound): pods "missing" not found',
            id="a missing pod is NotFound",
        ),
        pytest.param(
            ["POD", "-c", "nope"],
            "Error from server (BadRequest): container nope is not valid for pod POD",
            id="an unknown container is BadRequest naming it",
        ),
    ],
)  # fmt: skip
async def test_exec_errors_answer_as_kube_apiserver(
    served: tuple[Plane, str], args: list[str], message: str
) -> None:
    plane, pod = served
    args = [a.replace("POD", pod) for a in args]
    code, _, err = await _kubectl(plane, "exec", *args, "--", "true")
    assert code == 1
    assert err.strip().splitlines()[-1] == message.replace("POD", pod)


async def test_exec_into_a_finished_container_is_refused(served: tuple[Plane, str]) -> None:
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    plane, _ = served
    js = make_jobset("finished", ["true"], pods=1)
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    await plane.terminal("finished")
    pod = (await plane.pods("finished"))[0]["metadata"]["name"]
    # kubectl refuses on its own from the pod's phase; the API answers as the kubelet does.
    code, _, err = await _kubectl(plane, "exec", pod, "--", "true")
    assert code == 1 and "cannot exec into a container in a completed pod" in err
    with _core(plane) as core, pytest.raises(ApiException) as raised:
        await asyncio.to_thread(
            stream, core.connect_get_namespaced_pod_exec, pod, "default", command=["true"],
            stdout=True, stderr=True, stdin=False, tty=False,
        )  # fmt: skip
    # The client reports a failed handshake as status 0, the answer in its reason.
    reason = str(raised.value.reason)
    assert "Handshake status 500" in reason
    assert 'unable to upgrade connection: container not found (\\"node\\")' in reason


async def test_exec_and_port_forward_on_the_host_network(host_plane: Plane) -> None:
    plane = host_plane
    plane.server.serve_pod_streams(PodStreams(plane.executor.kubelet))
    plane.server.write_kubeconfig(plane.home / "kubeconfig")
    # On the host's network the pod's server takes a host port: a free one, not 8080, which
    # another process on the machine may hold.
    port = _free_port()
    pod = (await _running_pod(plane, "hostnet", user=None, port=port))["metadata"]["name"]
    # As root, an exec holds the capabilities the container holds (PID 2, its command), no more,
    # and counts against its limits (the container's cgroups, where they are enforced).
    script = (
        "echo $GREETING; grep CapEff /proc/self/status; grep CapEff /proc/2/status; "
        "cmp /proc/self/cgroup /proc/2/cgroup && echo same cgroups"
    )
    code, out, _ = await _kubectl(plane, "exec", pod, "--", "sh", "-c", script)
    greeting, own, container, cgroups = out.splitlines()
    assert (code, greeting, cgroups) == (0, "hi", "same cgroups")
    assert own == container
    with _core(plane) as core:
        reply = await asyncio.to_thread(_fetch_through_client, core, pod, port)
    assert reply.startswith(b"HTTP/1.0 200")


def _fetch_through_client(core: Any, pod: str, port: int = 8080) -> bytes:
    """GET / from the pod's ``port`` through the official client's port-forward."""
    from kubernetes.stream import portforward

    pf = portforward(core.connect_get_namespaced_pod_portforward, pod, "default", ports=str(port))
    try:
        sock = pf.socket(port)
        sock.setblocking(True)
        sock.settimeout(30)
        sock.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        sock.close()
        assert pf.error(port) is None
    finally:
        pf.close()
        # The client's proxy thread closes the WebSocket once it sees every port closed.
        for thread in threading.enumerate():
            if thread.name.startswith("Kubernetes port forward proxy"):
                thread.join(30)
        # websocket-client's close() skips closing the socket once the server has closed.
        pf.websocket.shutdown()
    return reply


@pytest.fixture
async def plain_plane(tmp_path: Path) -> AsyncIterator[Plane]:
    """The engine where bwrap cannot run: pods are plain processes on the host's network."""
    settings = ExecutorSettings(
        home=tmp_path, sandbox_mode="plain", pod_network=False, max_grace_s=2.0
    )
    async with running_plane(tmp_path, settings, pod_streams=True) as plane:
        yield plane


async def test_exec_in_plain_mode_runs_beside_the_container(plain_plane: Plane) -> None:
    plane = plain_plane
    pod = (await _running_pod(plane, "plain", user=None))["metadata"]["name"]
    code, out, _ = await _kubectl(plane, "exec", pod, "--", "sh", "-c", "echo $GREETING; pwd")
    assert (code, out) == (0, "hi\n/tmp\n")
    code, out, _ = await _kubectl(plane, "exec", "-i", pod, "--", "cat", stdin=b"piped\n")
    assert (code, out) == (0, "piped\n")
    code, seen = await _exec_on_terminal(plane, pod, b"stty size; exit 2\n")
    assert code == 2 and b"30 100\r\n" in seen, seen
