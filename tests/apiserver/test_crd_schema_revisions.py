"""A served kind's writes follow the schema of its CRD as stored now: the one the server was
started with until a CRD is installed, each revision of the installed CRD as it is replaced,
and the server's own again once the installed one is deleted (the schema compiled for a CRD
revision is kept only while that revision is the stored one)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import namespaced_crd, own_server

from kubetrain.kube.client import KubeClient
from kubetrain.kube.kinds import CUSTOM_RESOURCE_DEFINITION

Obj = dict[str, Any]
GADGETS = ("kt-test.io/v1", "gadgets")
CRDS = (CUSTOM_RESOURCE_DEFINITION.api_version, CUSTOM_RESOURCE_DEFINITION.plural)

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="starts its own server"
)


def _crd(**spec_props: Any) -> Obj:
    """Kind Gadget: ``spec.size`` defaults to 1; ``spec_props`` add fields."""
    size = {"type": "integer", "default": 1}
    return namespaced_crd("Gadget", "gadgets", {"size": size, **spec_props})


def _color(default: str) -> Obj:
    return {"type": "string", "default": default}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[KubeClient]:
    async with own_server(tmp_path, [_crd()]) as client:
        yield client


async def _spec(api: KubeClient, name: str) -> Any:
    """The spec stored for a new Gadget sent with a ``color`` and no size."""
    body = {
        "apiVersion": "kt-test.io/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"color": "green"} if name.startswith("sent-") else {},
    }
    return (await api.create(*GADGETS, body))["spec"]


async def test_each_revision_of_the_stored_crd_applies_then_the_servers_own_again(
    api: KubeClient,
) -> None:
    # The CRD the server was started with knows no color: pruned.
    assert await _spec(api, "sent-0") == {"size": 1}
    installed = await api.create(*CRDS, _crd(color=_color("blue")))
    assert await _spec(api, "a") == {"size": 1, "color": "blue"}
    installed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["color"] = _color("red")
    await api.replace(*CRDS, installed)
    assert await _spec(api, "b") == {"size": 1, "color": "red"}
    assert await _spec(api, "sent-1") == {"size": 1, "color": "green"}
    await api.delete(*CRDS, "gadgets.kt-test.io")
    assert await _spec(api, "c") == {"size": 1}
    assert await _spec(api, "sent-2") == {"size": 1}
