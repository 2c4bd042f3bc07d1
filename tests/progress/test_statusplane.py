"""The daemon's status plane: port choice, certificate names, hosts, environment, token provider."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import pytest
from progress_plane import NAMESPACE, Plane

from kubetrain.controller.pki import service_dns_names
from kubetrain.controller.statusserver import status_audience
from kubetrain.local.statusplane import LOOPBACK, start_status_plane, token_provider
from kubetrain.local.tokens import load_or_create_key, verify

SERVICE = "kubeflow-trainer-controller-manager.kubeflow-system.svc"


async def test_the_plane_serves_tls_for_the_service_names_on_a_remembered_port(
    plane: Plane, tmp_path: Path
) -> None:
    kubeconfig = plane.server.write_kubeconfig(tmp_path / "kubeconfig")
    # Hold 10443 so the plane has to fall back, as beside another daemon.
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        blocker.bind((LOOPBACK, 10443))
        blocker.listen()
    except OSError:
        pass  # already taken by someone else: the same situation
    try:
        first = await start_status_plane(plane.home, kubeconfig)
        port = first.port
        await first.close()
        again = await start_status_plane(plane.home, kubeconfig)
    finally:
        blocker.close()
    try:
        assert port != 10443 and again.port == port  # running pods were rendered with it
        env = again.environment()
        assert env.status_server_port == port and "BEGIN CERTIFICATE" in env.ca_pem
        assert env.status_server_base_url == f"https://{SERVICE}:{port}"
        assert set(again.hosts()) == set(
            service_dns_names("kubeflow-trainer-controller-manager", "kubeflow-system")
        )
        assert set(again.hosts().values()) == {LOOPBACK}
        # The certificate verifies under the Service name (as pods dial it) and 127.0.0.1.
        context = ssl.create_default_context(cadata=env.ca_pem)
        for name in (SERVICE, LOOPBACK):
            _, writer = await asyncio.open_connection(
                LOOPBACK, port, ssl=context, server_hostname=name
            )
            writer.close()
            await writer.wait_closed()
    finally:
        await again.close()


async def test_the_token_provider_asks_the_api_server_for_a_pod_bound_token(plane: Plane) -> None:
    from kubetrain.kube.client import connect

    pod = await plane.create_pod("job-node-0-0")
    api = connect(plane.server.write_kubeconfig(plane.home / "kc"))
    try:
        token = await token_provider(api)(pod, status_audience(NAMESPACE, "job"))
    finally:
        await api.close()
    claims = verify(load_or_create_key(plane.home), token, now=int(time.time()))
    assert claims.audiences == (status_audience(NAMESPACE, "job"),)
    assert claims.pod is not None and claims.pod.uid == pod["metadata"]["uid"]
    assert plane.authority.minted == 1


async def test_a_token_for_a_missing_pod_is_refused(plane: Plane) -> None:
    from kubetrain.kube.client import ApiError, connect

    ghost = {"metadata": {"name": "ghost", "namespace": NAMESPACE, "uid": "u"}, "spec": {}}
    api = connect(plane.server.write_kubeconfig(plane.home / "kc"))
    try:
        with pytest.raises(ApiError) as refused:
            await token_provider(api)(ghost, status_audience(NAMESPACE, "job"))
    finally:
        await api.close()
    assert refused.value.code == 404
