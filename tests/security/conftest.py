"""One local engine for the security suite, with its home outside /tmp (which every pod has
private anyway: the engine home itself must be what hides it), and a framework-less runtime."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest
from security_support import RUNTIME

from kubetrain.kube.client import KubeClient, connect
from kubetrain.local.daemon import DaemonInfo, ensure_daemon, stop_daemon


@pytest.fixture(scope="session")
def engine() -> Iterator[tuple[Path, DaemonInfo]]:
    # Not under /tmp, which every pod has private anyway: the engine home itself must be hidden.
    home = Path(tempfile.mkdtemp(prefix="kubetrain-security-", dir="/var/tmp"))
    try:
        info = ensure_daemon(home)
        url = f"{info.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainingruntimes"
        headers = {"Authorization": f"Bearer {info.token}"}
        with httpx2.Client(verify=False) as http:
            http.post(url, json=RUNTIME, headers=headers).raise_for_status()
        yield home, info
    finally:
        stop_daemon(home, kill_pods=True, timeout=10)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
async def api(engine: tuple[Path, DaemonInfo]) -> AsyncIterator[KubeClient]:
    api = connect(engine[1].kubeconfig)
    try:
        yield api
    finally:
        await api.close()
