"""The embedded API server applies the structural-schema defaults of every CRD it serves, as
kube-apiserver does: on create and update, from the CRD stored for the kind where one was
installed (``kubectl apply``), and to what it loads from storage (not written back)."""

from __future__ import annotations

import copy
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import namespaced_crd

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import CUSTOM_RESOURCE_DEFINITION
from kubetrain.local.apiserver import ApiServer

Obj = dict[str, Any]
WIDGETS = ("kt-test.io/v1", "widgets")

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="starts its own servers"
)


def widget_crd(**spec_props: Any) -> Obj:
    """A served kind of the test's own: ``spec.size`` defaults to 1, ``spec.ports[].protocol``
    to TCP; ``spec_props`` add fields."""
    ports = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "port": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"},
            },
        },
    }
    size = {"type": "integer", "default": 1}
    return namespaced_crd("Widget", "widgets", {"size": size, "ports": ports, **spec_props})


def widget(**spec: Any) -> Obj:
    return {
        "apiVersion": "kt-test.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": spec,
    }


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start a server over ``tmp_path`` serving the given CRD; one at a time."""
    running: list[tuple[ApiServer, KubeClient]] = []

    async def stop() -> None:
        while running:
            server, client = running.pop()
            await client.close()
            await server.close()

    async def start(crd: Obj, *, in_memory: bool = True) -> KubeClient:
        await stop()
        server = ApiServer(tmp_path, crds=[crd], in_memory=in_memory, tls=False, auth=False)
        await server.start()
        client = connect(server.write_kubeconfig(tmp_path / "kubeconfig"))
        running.append((server, client))
        return client

    yield start
    await stop()


async def test_create_and_update_get_the_crds_defaults(serve: Callable[..., Any]) -> None:
    api: KubeClient = await serve(widget_crd())
    created = await api.create(*WIDGETS, widget(ports=[{"port": 80}]))
    assert created["spec"] == {"size": 1, "ports": [{"port": 80, "protocol": "TCP"}]}
    # An update that leaves a defaulted field out gets the default again.
    body = copy.deepcopy(created)
    body["spec"] = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 8080}]}
    updated = await api.replace(*WIDGETS, body)
    assert updated["spec"] == {
        "size": 1,
        "ports": [{"port": 53, "protocol": "UDP"}, {"port": 8080, "protocol": "TCP"}],
    }
    assert await api.get(*WIDGETS, "w", namespace="default") == updated


async def test_a_crd_installed_for_a_served_kind_brings_its_defaults(
    serve: Callable[..., Any],
) -> None:
    api: KubeClient = await serve(widget_crd())
    installed = widget_crd(color={"type": "string", "default": "blue"})
    await api.create(
        CUSTOM_RESOURCE_DEFINITION.api_version, CUSTOM_RESOURCE_DEFINITION.plural, installed
    )
    created = await api.create(*WIDGETS, widget())
    assert created["spec"] == {"size": 1, "color": "blue"}


async def test_objects_stored_before_a_crd_gained_a_default_read_back_with_it(
    serve: Callable[..., Any],
) -> None:
    api: KubeClient = await serve(widget_crd())
    before = await api.create(*WIDGETS, widget(size=2))
    installed = widget_crd(color={"type": "string", "default": "blue"})
    await api.create(
        CUSTOM_RESOURCE_DEFINITION.api_version, CUSTOM_RESOURCE_DEFINITION.plural, installed
    )
    after = await api.get(*WIDGETS, "w", namespace="default")
    assert after["spec"] == {"size": 2, "color": "blue"}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_objects_loaded_from_storage_get_defaults_their_crd_gained_since(
    serve: Callable[..., Any],
) -> None:
    api: KubeClient = await serve(widget_crd(), in_memory=False)
    before = await api.create(*WIDGETS, widget(size=2))
    api = await serve(widget_crd(color={"type": "string", "default": "blue"}), in_memory=False)
    after = await api.get(*WIDGETS, "w", namespace="default")
    assert after["spec"] == {"size": 2, "color": "blue"}
    # Read, not written: the object is the one stored before, at the same resourceVersion.
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    listed, _ = await api.list(*WIDGETS, namespace="default")
    assert [w["spec"] for w in listed] == [{"size": 2, "color": "blue"}]
