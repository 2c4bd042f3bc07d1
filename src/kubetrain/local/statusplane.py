"""The local engine's half of TrainJobStatus: what a cluster's install provides, for one home.

On a cluster the manager Service ``kubeflow-trainer-controller-manager.kubeflow-system.svc``
fronts the status server on port 10443, its certificate is signed by the CA the controller
copies into each ``<trainjob>-tls-config``, the kubelet projects pod-bound tokens, and cluster
DNS resolves the Service. `start_status_plane` gives the daemon the same four things:

- the real ``StatusServer`` over HTTPS on the loopback address, port 10443 when free (so a
  rendered TrainJob reads exactly as upstream's), else the port it had last time, else any;
- a CA and serving certificate under ``<home>/status-server/`` for every DNS form of the Service
  and 127.0.0.1 (`StatusPlane.environment` hands the CA and port to the controller's render);
- ``<home>/metrics.db``, the history of every accepted report (``kubetrain metrics``);
- `StatusPlane.hosts` for the pods' /etc/hosts, and `token_provider` for the executor, which
  asks the API server for pod-bound tokens (TokenRequest) as the kubelet does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.controller.pki import ensure_serving_cert, service_dns_names
from kubetrain.controller.statusserver import StatusServer, TokenReviewVerifier
from kubetrain.kube.client import KubeClient, connect
from kubetrain.local.history import HISTORY_FILE, MetricsHistory
from kubetrain.local.tokens import request_token
from kubetrain.runtime.config import Environment

__all__ = [
    "LOOPBACK",
    "STATUS_DIR",
    "TOKEN_LIFETIME_S",
    "StatusPlane",
    "start_status_plane",
    "token_provider",
]

LOOPBACK = "127.0.0.1"
STATUS_DIR = "status-server"
_PORT_FILE = "port"
# The local kubelet writes a pod's projected token once, at start, and does not rotate it as a
# cluster's kubelet does; so it asks for a week instead of the hour the volume names. Tokens are
# bound to their pod: the status server refuses them as soon as the pod is gone.
TOKEN_LIFETIME_S = 7 * 24 * 3600


@dataclass
class StatusPlane:
    """A running status server with what the controller and the executor need to reach it."""

    server: StatusServer
    history: MetricsHistory
    client: KubeClient
    port: int
    ca_pem: str
    base: Environment

    def environment(self) -> Environment:
        """The controller's render environment: this CA in ``tls-config``, this port in the URL."""
        from dataclasses import replace

        return replace(self.base, ca_pem=self.ca_pem, status_server_port=self.port)

    def hosts(self) -> dict[str, str]:
        """Every DNS form of the manager Service → the daemon's loopback address (pods' /etc/hosts)."""
        names = service_dns_names(self.base.status_server_service, self.base.operator_namespace)
        return dict.fromkeys(names, LOOPBACK)

    async def close(self) -> None:
        await self.server.stop()
        await self.client.close()
        self.history.close()


async def start_status_plane(
    home: Path,
    kubeconfig: Path,
    *,
    base: Environment | None = None,
    port: int | None = None,
) -> StatusPlane:
    """Start the status server of ``home``, talking to the API server of ``kubeconfig``."""
    env = base or Environment()
    folder = home / STATUS_DIR
    cert = ensure_serving_cert(
        folder, service_dns_names(env.status_server_service, env.operator_namespace), [LOOPBACK]
    )
    history = MetricsHistory(home / HISTORY_FILE)
    client = connect(kubeconfig)
    server = StatusServer(
        client,
        TokenReviewVerifier(client),
        on_accepted=lambda ns, name, uid, ts: history.record(ns, name, uid, ts),
    )
    # The port of the previous run first: running pods were rendered with it.
    candidates = [port] if port is not None else [_previous_port(folder), env.status_server_port, 0]
    last: OSError | None = None
    try:
        for candidate in dict.fromkeys(c for c in candidates if c is not None):
            try:
                bound = await server.start(LOOPBACK, candidate, cert.server_context())
                break
            except OSError as err:
                last = err
                await server.stop()
        else:
            assert last is not None
            raise last
    except BaseException:
        await client.close()
        history.close()
        raise
    with contextlib.suppress(OSError):
        (folder / _PORT_FILE).write_text(f"{bound}\n")
    return StatusPlane(server, history, client, bound, cert.ca_pem, env)


def _previous_port(folder: Path) -> int | None:
    try:
        return int((folder / _PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def token_provider(api: KubeClient) -> Callable[[dict[str, Any], str], Awaitable[str]]:
    """The executor's ``TokenProvider``: a TokenRequest bound to the pod, through ``api``."""

    async def provide(pod: dict[str, Any], audience: str) -> str:
        return await request_token(api, pod, audience, expiration_s=TOKEN_LIFETIME_S)

    return provide
