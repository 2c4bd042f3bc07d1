"""Fixtures: an embedded API server with kubetrain's admission, and the webhook server over HTTPS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_support import client_for, embedded_server

from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer


@pytest.fixture(scope="session")
def crds() -> list[dict[str, object]]:
    from kubetrain.api.schema import crd_manifests

    return crd_manifests()


@pytest.fixture
async def apiserver(tmp_path: Path, crds: list[dict[str, object]]) -> AsyncIterator[ApiServer]:
    async with embedded_server(tmp_path, crds) as server:
        yield server


@pytest.fixture
async def kube(apiserver: ApiServer) -> AsyncIterator[KubeClient]:
    client = client_for(apiserver)
    try:
        yield client
    finally:
        await client.close()
