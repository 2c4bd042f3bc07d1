"""The real embedded API server, a controller started per test, and small helpers.

One ``ApiServer`` (https, bearer token, the project's CRDs) runs for the whole session in a
background thread, exactly as ``kubetrain serve`` runs it; each test gets its own namespace and
its own controller watching only that namespace, so tests never see each other's objects.
Tests that stop the server itself start a private one (``private_server``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from controller_plane import (
    Plane,
    PrivateServer,
)

from kubetrain.api.types import Obj
from kubetrain.controller import connect
from kubetrain.local.apiserver import ApiServer, ServerThread


@pytest.fixture(scope="session")
def torch_runtime() -> Obj:
    """kubetrain's own ``torch-distributed`` (upstream's file, compared in tests/runtime)."""
    from kubetrain.runtime.defaults import default_runtimes

    (runtime,) = [r for r in default_runtimes() if r["metadata"]["name"] == "torch-distributed"]
    return runtime


@pytest.fixture(scope="session")
def server_thread(
    tmp_path_factory: pytest.TempPathFactory, torch_runtime: Obj
) -> Iterator[ServerThread]:
    from kubetrain.api.schema import crd_manifests

    home = tmp_path_factory.mktemp("controller-home")
    crds = crd_manifests()
    thread = ServerThread(
        lambda: ApiServer(
            home, crds=crds, seed_objects=[torch_runtime], bookmark_interval=0.5, history=5000
        )
    )
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture(scope="session")
def kubeconfig(server_thread: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return server_thread.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")


@pytest.fixture
async def plane(kubeconfig: Path) -> AsyncIterator[Plane]:
    namespace = f"ctl-{uuid.uuid4().hex[:8]}"
    kube = connect(kubeconfig)
    await kube.create(
        "v1",
        "namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    p = Plane(kubeconfig, namespace, kube)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def private_server(tmp_path: Path, torch_runtime: Obj) -> AsyncIterator[PrivateServer]:
    server = PrivateServer(tmp_path / "home", torch_runtime)
    try:
        yield server
    finally:
        await server.stop()
