"""What is stored is read as the current schema says, and an update walks only what it changes.

kube-apiserver prunes and defaults what it reads from etcd, so an object stored by an older
schema reads as the current one; and it does not validate again the values an update leaves as
they are (validation ratcheting). Here both are seen through a restart over the same database,
with an object written into it as an older server would have left it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from apiserver_support import trainjob

from kubetrain.api import codec
from kubetrain.local.apiserver import ApiServer

URL = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": []}}},
}

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="embedded server only"
)


def _server(home: Path) -> ApiServer:
    from kubetrain.api.schema import crd_manifests

    return ApiServer(home, crds=crd_manifests(), tls=False, auth=False, seed_objects=[RUNTIME])


def _rewrite_stored(home: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Change a stored TrainJob in the database, as an older server could have written it."""
    with sqlite3.connect(home / "apiserver.db") as db:
        (data,) = db.execute("SELECT data FROM objects WHERE name = ?", (name,)).fetchone()
        obj = codec.loads(data)
        change(obj)
        db.execute("UPDATE objects SET data = ? WHERE name = ?", (codec.dumps(obj).decode(), name))


@pytest.fixture
async def restarted(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    """A server whose database holds TrainJob ``old`` with an unknown field and without its
    defaults in the spec, and a ``numNodes`` the schema refuses (a string)."""
    server = _server(tmp_path)
    await server.start()
    async with (
        aiohttp.ClientSession(server.url) as session,
        session.post(URL, json=trainjob("old")) as response,
    ):
        assert response.status == 201, await response.text()
    await server.close()

    def older(obj: dict[str, Any]) -> None:
        obj["spec"]["retiredField"] = "kept by an older schema"
        obj["spec"].pop("suspend", None)
        obj["spec"]["trainer"]["numNodes"] = "two"

    _rewrite_stored(tmp_path, "old", older)
    server = _server(tmp_path)
    await server.start()
    async with aiohttp.ClientSession(server.url) as session:
        yield session
    await server.close()


async def test_a_stored_object_reads_pruned_and_defaulted_by_the_current_schema(
    restarted: aiohttp.ClientSession,
) -> None:
    async with restarted.get(f"{URL}/old") as response:
        spec = (await response.json())["spec"]
    assert "retiredField" not in spec
    assert spec["suspend"] is False


async def test_a_status_write_leaves_the_stored_spec_unvalidated_but_a_spec_write_is_checked(
    restarted: aiohttp.ClientSession,
) -> None:
    status = {"status": {"conditions": []}}
    headers = {"Content-Type": "application/merge-patch+json"}
    async with restarted.patch(f"{URL}/old/status", json=status, headers=headers) as response:
        assert response.status == 200, await response.text()
    patch = {"spec": {"suspend": True}}
    async with restarted.patch(f"{URL}/old", json=patch, headers=headers) as response:
        answer = await response.json()
    assert response.status == 422
    assert "spec.trainer.numNodes: Invalid value" in answer["message"]
