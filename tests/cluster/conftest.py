"""Fixtures: an embedded API server with kubetrain's admission, and the webhook server over HTTPS."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
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


MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


@pytest.fixture(scope="session")
def kustomized() -> dict[str, list[dict[str, Any]]]:
    """Each overlay of ``manifests/`` as ``kubectl kustomize`` renders it, once per session:
    a render costs seconds of CPU, so the four run side by side and every test compares from
    here (skips without kubectl)."""
    from kubetrain.controller.deploy import OVERLAYS

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    renders = {
        overlay: subprocess.Popen(
            [
                kubectl,
                "kustomize",
                str(MANIFESTS if overlay == "default" else MANIFESTS / "overlays" / overlay),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for overlay in sorted(OVERLAYS)
    }
    # The C loader: the CRDs make the pure-Python one take seconds per render.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: dict[str, list[dict[str, Any]]] = {}
    for overlay, proc in renders.items():
        stdout, stderr = proc.communicate()
        assert proc.returncode == 0, f"kubectl kustomize {overlay}: {stderr}"
        out[overlay] = [d for d in yaml.load_all(stdout, Loader=loader) if d]
    return out
