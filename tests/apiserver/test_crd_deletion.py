"""Deleting a CRD takes its custom resources along, as the apiextensions server does: every
instance is deleted (and what they own is collected), then the CRD goes. An instance held by a
finalizer keeps the CRD ``Terminating`` and refuses new instances until it goes too. This is what
makes ``kubectl delete -k manifests/`` leave no TrainJob, JobSet or pod behind."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import namespaced_crd, own_server

from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.kinds import CUSTOM_RESOURCE_DEFINITION

Obj = dict[str, Any]
GADGETS = ("kt-test.io/v1", "gadgets")
CRDS = (CUSTOM_RESOURCE_DEFINITION.api_version, CUSTOM_RESOURCE_DEFINITION.plural)
CRD_NAME = "gadgets.kt-test.io"
CLEANUP = "customresourcecleanup.apiextensions.k8s.io"

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="starts its own server"
)


def _crd() -> Obj:
    return namespaced_crd("Gadget", "gadgets", {"size": {"type": "integer"}})


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[KubeClient]:
    async with own_server(tmp_path, [_crd()]) as client:
        await client.create(*CRDS, _crd())
        await client.create("v1", "namespaces", {"metadata": {"name": "other"}})
        yield client


def _gadget(name: str, namespace: str = "default", **meta: Any) -> Obj:
    return {
        "apiVersion": "kt-test.io/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"size": 1},
    }


async def _names(api: KubeClient, api_version: str, plural: str) -> list[str]:
    items, _ = await api.list(api_version, plural)
    return sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in items)


async def test_its_instances_in_every_namespace_and_what_they_own_go_with_the_crd(
    api: KubeClient,
) -> None:
    owner = await api.create(*GADGETS, _gadget("a"))
    await api.create(*GADGETS, _gadget("b", "other"))
    ref = {"apiVersion": "kt-test.io/v1", "kind": "Gadget", "name": "a",
           "uid": owner["metadata"]["uid"]}  # fmt: skip
    owned = {"metadata": {"name": "of-a", "namespace": "default", "ownerReferences": [ref]}}
    await api.create("v1", "configmaps", owned)
    await api.delete(*CRDS, CRD_NAME)
    assert await _names(api, *GADGETS) == []
    assert "default/of-a" not in await _names(api, "v1", "configmaps")
    with pytest.raises(ApiError) as gone:
        await api.get(*CRDS, CRD_NAME)
    assert gone.value.code == 404


async def test_an_instance_held_by_a_finalizer_keeps_the_crd_terminating_until_it_goes(
    api: KubeClient,
) -> None:
    await api.create(*GADGETS, _gadget("held", finalizers=["example.com/hold"]))
    await api.create(*GADGETS, _gadget("free", "other"))
    await api.delete(*CRDS, CRD_NAME)
    crd = await api.get(*CRDS, CRD_NAME)
    assert crd["metadata"]["deletionTimestamp"]
    assert crd["metadata"]["finalizers"] == [CLEANUP]
    (terminating,) = [c for c in crd["status"]["conditions"] if c["type"] == "Terminating"]
    assert (terminating["status"], terminating["reason"]) == ("True", "InstanceDeletionInProgress")
    held = await api.get(*GADGETS, "held", namespace="default")
    assert held["metadata"]["deletionTimestamp"]
    assert await _names(api, *GADGETS) == ["default/held"]
    with pytest.raises(ApiError) as refused:
        await api.create(*GADGETS, _gadget("new"))
    assert (refused.value.code, refused.value.reason) == (405, "MethodNotAllowed")
    assert refused.value.message == (
        "create not allowed while custom resource definition is terminating"
    )
    # The finalizer's owner lets go: the last instance goes, and the CRD with it.
    held["metadata"]["finalizers"] = []
    await api.replace(*GADGETS, held)
    assert await _names(api, *GADGETS) == []
    with pytest.raises(ApiError) as gone:
        await api.get(*CRDS, CRD_NAME)
    assert gone.value.code == 404
    # A new CRD of the kind serves it afresh.
    await api.create(*CRDS, _crd())
    assert (await api.create(*GADGETS, _gadget("new")))["metadata"]["uid"]
