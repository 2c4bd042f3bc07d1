"""The pod network: each pod its own network namespace and IP, names across JobSets, egress.

Runs where the engine can build the network (user + network namespaces, a bridge,
slirp4netns); elsewhere each test skips with the reason the engine gives (`kubetrain doctor`
says the same).
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset

from kubetrain.kube.kinds import JOBSET, SERVICE

pytestmark = pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning")

# Pod 0 of each JobSet listens on 29500 of every interface (as torch's TCPStore does) until it
# has had one visitor; pod 1 visits the *other* JobSet's pod 0 through the name given in
# argv[1], and writes what it saw. Both JobSets hold 29500 at the same time, or neither ends.
SERVER_AND_VISITOR = """
import os, socket, sys, time
if os.environ["JOB_COMPLETION_INDEX"] == "0":
    s = socket.socket(); s.bind(("0.0.0.0", 29500)); s.listen()
    c, _ = s.accept(); c.sendall(socket.gethostname().encode()); c.close()
else:
    for _ in range(600):
        try:
            c = socket.create_connection((sys.argv[1], 29500), timeout=2); break
        except OSError: time.sleep(0.05)
    print("reached", c.recv(100).decode(), "at", socket.gethostbyname(sys.argv[1]))
"""


def _index_env(js: dict[str, Any]) -> dict[str, Any]:
    for rj in js["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c["env"] = [
                {
                    "name": "JOB_COMPLETION_INDEX",
                    "valueFrom": {
                        "fieldRef": {
                            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                        }
                    },
                }
            ]
    return js


def _need_network(plane: Plane) -> None:
    if plane.executor.kubelet.network is None:
        pytest.skip(f"no pod network on this machine: {plane.executor.kubelet.network_note}")


def _log(plane: Plane, pod: dict[str, Any]) -> str:
    name = pod["metadata"]["name"]
    container = pod["spec"]["containers"][0]["name"]
    return (plane.home / "logs" / "default" / name / f"{container}.log").read_text()


async def test_two_jobsets_bind_the_same_port_at_once_and_reach_each_other_by_name(
    plane: Plane,
) -> None:
    _need_network(plane)
    # "red" visits blue's pod by its Service name, "blue" visits red's pod by its pod DNS name.
    targets = {"red": "blue-node-0-0.blue.default.svc.cluster.local", "blue": "red"}
    for name, target in targets.items():
        js = make_jobset(name, [PY, "-c", SERVER_AND_VISITOR, target], pods=2)
        await plane.api.create(JOBSET.api_version, JOBSET.plural, _index_env(js))
    done = await asyncio.gather(*(plane.terminal(n, timeout=60) for n in targets))
    assert [d["status"]["terminalState"] for d in done] == ["Completed", "Completed"]
    red, blue = (await plane.pods("red")), (await plane.pods("blue"))
    assert {p["status"]["podIP"][:6] for p in red + blue} == {"10.88."}
    assert _log(plane, red[1]).strip() == f"reached blue-node-0-0 at {blue[0]['status']['podIP']}"
    # The Service "red" answers with one of its endpoints: red's pods.
    reached, ip = _log(plane, blue[1]).split()[1::2]
    assert reached == "red-node-0-0" and ip in {p["status"]["podIP"] for p in red}


@pytest.fixture
def host_server() -> Iterator[int]:
    """An HTTP server on the host's loopback only."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_pod_reaches_the_hosts_loopback_and_the_api_server_by_name(
    plane: Plane, host_server: int
) -> None:
    _need_network(plane)
    api_port = plane.server.port
    ca = (plane.server.ca_pem or b"").decode()
    script = (
        "import ssl, sys, urllib.request as u\n"
        f"print(u.urlopen('http://host.kubetrain.internal:{host_server}/', timeout=10).read().decode())\n"
        # Verified against the API server's CA: the name is the cluster's.
        "ctx = ssl.create_default_context(cadata=sys.argv[1])\n"
        f"print(u.urlopen('https://kubernetes.default.svc:{api_port}/version', timeout=10, context=ctx).status)\n"
    )
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, make_jobset("egress", [PY, "-c", script, ca], pods=1)
    )
    done = await plane.terminal("egress", timeout=60)
    [pod] = await plane.pods("egress")
    assert done["status"]["terminalState"] == "Completed", _log(plane, pod)
    assert _log(plane, pod).split() == ["hello", "from", "the", "host", "200"]


async def test_a_service_name_resolves_to_its_ready_endpoints_for_pods_of_other_jobsets(
    plane: Plane,
) -> None:
    _need_network(plane)
    await plane.api.create(
        SERVICE.api_version,
        SERVICE.plural,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "cache", "namespace": "default"},
            "spec": {"selector": {"app": "cache"}, "ports": [{"port": 8080}]},
        },
    )
    # The server answers once, then leaves; the client finds it by the Service's name, which
    # appears in its /etc/hosts once the server's pod is ready (it may start first).
    server = (
        "import socket\n"
        "s = socket.socket(); s.bind(('0.0.0.0', 8080)); s.listen()\n"
        "c, _ = s.accept(); c.sendall(b'from the cache'); c.close()\n"
    )
    client = (
        "import socket, time\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        c = socket.create_connection(('cache.default.svc.cluster.local', 8080), timeout=2); break\n"
        "    except OSError: time.sleep(0.05)\n"
        "print(c.recv(100).decode(), socket.gethostbyname('cache'))\n"
    )
    js = make_jobset("cache-server", [PY, "-c", server], pods=1)
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "labels": {"app": "cache"}
    }
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, make_jobset("reader", [PY, "-c", client], pods=1)
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    done = await asyncio.gather(
        *(plane.terminal(n, timeout=60) for n in ("reader", "cache-server"))
    )
    [reader] = await plane.pods("reader")
    [cache] = await plane.pods("cache-server")
    assert [d["status"]["terminalState"] for d in done] == ["Completed", "Completed"], _log(
        plane, reader
    )
    assert _log(plane, reader).split() == ["from", "the", "cache", cache["status"]["podIP"]]
