"""An update walks (prunes, defaults, validates) only the top-level fields it changes, since
this server walked the rest when it stored them; an object read from the database may predate
the schema, so its first write walks it whole. Seen through a restart over the same database,
with an object written into it as an older server could have left it.
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
    """A server whose database holds TrainJob ``old`` with a field the schema does not know
    and without the spec's defaults."""
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

    _rewrite_stored(tmp_path, "old", older)
    server = _server(tmp_path)
    await server.start()
    async with aiohttp.ClientSession(server.url) as session:
        yield session
    await server.close()


MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_a_status_write_to_an_object_from_the_database_prunes_and_defaults_it_whole(
    restarted: aiohttp.ClientSession,
) -> None:
    async with restarted.get(f"{URL}/old") as response:
        assert "retiredField" in (await response.json())["spec"]  # read as stored
    status = {"status": {"conditions": []}}
    async with restarted.patch(f"{URL}/old/status", json=status, headers=MERGE) as response:
        assert response.status == 200, await response.text()
        spec = (await response.json())["spec"]
    assert "retiredField" not in spec
    assert spec["suspend"] is False


async def test_a_status_write_keeps_the_spec_this_server_stored(
    restarted: aiohttp.ClientSession,
) -> None:
    async with restarted.post(URL, json=trainjob("new")) as response:
        stored = (await response.json())["spec"]
    status = {"status": {"conditions": []}}
    async with restarted.patch(f"{URL}/new/status", json=status, headers=MERGE) as response:
        assert response.status == 200, await response.text()
        assert (await response.json())["spec"] == stored
    spec = {"spec": {"trainer": {"numNodes": "two"}}}
    async with restarted.patch(f"{URL}/new", json=spec, headers=MERGE) as response:
        answer = await response.json()
    assert response.status == 422
    assert "spec.trainer.numNodes: Invalid value" in answer["message"]
