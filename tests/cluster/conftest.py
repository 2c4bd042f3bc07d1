"""Fixtures: an embedded API server with kubetrain's admission, and the webhook server over HTTPS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cluster_support import client_for

from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.runtime.admission import TrainerAdmission


@pytest.fixture(scope="session")
def crds() -> list[dict[str, object]]:
    from kubetrain.api.schema import crd_manifests

    return crd_manifests()


@pytest.fixture
async def apiserver(tmp_path: Path, crds: list[dict[str, object]]) -> AsyncIterator[ApiServer]:
    from kubetrain.runtime.defaults import default_runtimes

    server = ApiServer(
        tmp_path / "home",
        crds=crds,
        admission=TrainerAdmission(),
        seed_objects=default_runtimes,
        in_memory=True,
        bookmark_interval=0.5,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def kube(apiserver: ApiServer) -> AsyncIterator[KubeClient]:
    client = client_for(apiserver)
    try:
        yield client
    finally:
        await client.close()
