"""Schema (pruning, defaulting, validation) and in-process admission, as upstream's webhooks answer."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from apiserver_support import kube_request, trainjob
from kubernetes.client import ApiException

from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver import (
    ApiServer,
    ChainAdmission,
    ObjectReader,
    Operation,
    TrainJobDefaulter,
)

T = "/apis/trainer.kubeflow.org/v1alpha1"


def _with(path: list[str], value: Any) -> dict[str, Any]:
    body = trainjob("bad")
    node = body
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "query", "code", "names"),
    [
        (
            _with(["spec", "colour"], "blue"),
            [("fieldValidation", "Strict")],
            400,
            'unknown field "spec.colour"',
        ),
        (_with(["spec", "trainer", "numNodes"], "two"), [], 422, "spec.trainer.numNodes"),
        (_with(["spec", "runtimeRef", "name"], ""), [], 422, "spec.runtimeRef.name"),
        (_with(["spec", "runtimeRef"], {}), [], 422, "spec.runtimeRef.name: Required value"),
        (_with(["spec", "suspend"], "yes"), [], 422, "spec.suspend"),
    ],
    ids=[
        "an unknown field under strict field validation (kubectl's default)",
        "a wrong type",
        "a value below the minimum length",
        "a missing required field",
        "a string where a boolean belongs",
    ],
)
def test_a_bad_trainjob_is_refused_naming_the_field_and_nothing_is_stored(
    api_client: Any,
    tj_api: Any,
    ns: str,
    body: dict[str, Any],
    query: list[tuple[str, str]],
    code: int,
    names: str,
) -> None:
    with pytest.raises(ApiException) as err:
        kube_request(api_client, "POST", f"{T}/namespaces/{ns}/trainjobs", body, query=query)
    assert err.value.status == code
    assert names in json.loads(err.value.body)["message"]
    assert tj_api("list")["items"] == []


def test_an_unknown_field_is_pruned_with_a_warning_by_default(api_client: Any, ns: str) -> None:
    code, created, headers = kube_request(
        api_client, "POST", f"{T}/namespaces/{ns}/trainjobs", _with(["spec", "colour"], "blue")
    )
    assert code == 201 and "colour" not in created["spec"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.colour\\""'


def test_crd_defaults_are_applied(tj_api: Any) -> None:
    created = tj_api("create", trainjob("defaults"))
    assert created["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert created["spec"]["suspend"] is False


def test_integral_floats_from_the_sdk_are_accepted(tj_api: Any) -> None:
    body = trainjob("floats")
    body["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"cpu": 2.0}, "requests": {"cpu": 2.0}}
    assert tj_api("create", body)["metadata"]["name"] == "floats"


# ---- admission, in process ---------------------------------------------------------------------


class _NodeLimit:
    """Denies more than 4 nodes, warns at 4, and needs the referenced runtime to exist."""

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]:
        return obj

    def validate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> tuple[list[FieldError], list[str]]:
        if obj.get("kind") != "TrainJob":
            return [], []
        errors: list[FieldError] = []
        nodes = obj["spec"].get("trainer", {}).get("numNodes", 1)
        if nodes > 4:
            errors.append(FieldError("spec.trainer.numNodes", "must be at most 4"))
        ref = obj["spec"]["runtimeRef"]["name"]
        if reader.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", None, ref) is None:
            errors.append(
                FieldError(
                    "spec.runtimeRef",
                    "specified clusterTrainingRuntime must be created before the TrainJob is created",
                )
            )
        return errors, (["four nodes is the most"] if nodes == 4 else [])


RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": []}}},
}


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    from kubetrain.api.schema import crd_manifests

    if os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG"):
        pytest.skip("admission is plugged into the embedded server only")
    clock = iter(f"2026-11-29T10:00:0{i}Z" for i in range(10))
    admission = ChainAdmission([TrainJobDefaulter(clock=lambda: next(clock)), _NodeLimit()])
    server = ApiServer(
        tmp_path,
        crds=crd_manifests(),
        admission=admission,
        in_memory=True,
        tls=False,
        auth=False,
        seed_objects=[RUNTIME],
    )
    await server.start()
    async with aiohttp.ClientSession(server.url) as session:
        yield session, f"{T}/namespaces/default/trainjobs"
    await server.close()


async def test_a_denial_is_403_with_the_webhook_message(
    local: tuple[aiohttp.ClientSession, str],
) -> None:
    session, url = local
    body = trainjob("big")
    body["spec"]["trainer"]["numNodes"] = 8
    body["spec"]["runtimeRef"]["name"] = "missing"
    async with session.post(url, json=body) as response:
        status = await response.json()
    assert response.status == 403 and status["reason"] == "Forbidden"
    assert status["message"] == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
        "[spec.trainer.numNodes: Invalid value: must be at most 4, "
        "spec.runtimeRef: Invalid value: specified clusterTrainingRuntime must be created before the TrainJob is created]"
    )
    async with session.get(url) as response:
        assert (await response.json())["items"] == []


async def test_admission_warnings_become_warning_headers(
    local: tuple[aiohttp.ClientSession, str],
) -> None:
    session, url = local
    body = trainjob("four")
    body["spec"]["trainer"]["numNodes"] = 4
    async with session.post(url, json=body) as response:
        assert response.status == 201
        assert response.headers.getall("Warning") == ['299 - "four nodes is the most"']


def _patch(manager: str, image: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"image": image}}}},
    }


async def test_runtime_patch_times_are_stamped_kept_and_refreshed(
    local: tuple[aiohttp.ClientSession, str],
) -> None:
    session, url = local
    body = trainjob("patched")
    body["spec"]["runtimePatches"] = [
        _patch("example.com/a", "one"),
        _patch("example.com/b", "one"),
    ]
    async with session.post(url, json=body) as response:
        created = await response.json()
    assert [p["time"] for p in created["spec"]["runtimePatches"]] == ["2026-11-29T10:00:00Z"] * 2
    changed = copy.deepcopy(created["spec"]["runtimePatches"])
    changed[1] = _patch("example.com/b", "two")
    changed.append(_patch("example.com/c", "one"))
    headers = {"Content-Type": "application/merge-patch+json"}
    async with session.patch(
        f"{url}/patched", json={"spec": {"runtimePatches": changed}}, headers=headers
    ) as response:
        updated = await response.json()
    times = {p["manager"]: p["time"] for p in updated["spec"]["runtimePatches"]}
    assert times == {
        "example.com/a": "2026-11-29T10:00:00Z",  # unchanged: keeps its time
        "example.com/b": "2026-11-29T10:00:01Z",  # changed: stamped again
        "example.com/c": "2026-11-29T10:00:01Z",  # new: stamped
    }
