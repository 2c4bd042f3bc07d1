"""Pods reach the API server as in a cluster: the executor gives each container the
service-account mount (token, ca.crt, namespace) and KUBERNETES_SERVICE_HOST/PORT, unless the
pod opts out or mounts that path itself; what the pod already sets is kept."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.executor.apiaccess import (
    API_HOST,
    MOUNT_PATH,
    ROOT_CA,
    VOLUME,
    with_api_access,
)
from kubetrain.local.executor.objects import pod_references


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "initContainers": [{"name": "setup", "image": "img"}],
        "containers": [{"name": "main", "image": "img"}],
    }
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {**base, **spec}}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or []}


def test_every_container_gets_the_mount_and_the_api_address() -> None:
    before = pod()
    after = with_api_access(before, 6443)
    assert "volumes" not in before["spec"], "the stored pod is not changed"
    (volume,) = after["spec"]["volumes"]
    assert volume["name"] == VOLUME
    sources = volume["projected"]["sources"]
    assert [sorted(s) for s in sources] == [["serviceAccountToken"], ["configMap"], ["downwardAPI"]]
    for c in [*after["spec"]["initContainers"], *after["spec"]["containers"]]:
        assert {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True} in c["volumeMounts"]
        assert env_of(c)["KUBERNETES_SERVICE_HOST"] == API_HOST
        assert env_of(c)["KUBERNETES_SERVICE_PORT"] == "6443"
    # The kubelet fetches the CA ConfigMap and asks for a token meant for the API server.
    config_maps, _, audiences = pod_references(after)
    assert config_maps == {ROOT_CA} and audiences == {""}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"automountServiceAccountToken": False}, id="a pod that opts out"),
        pytest.param(
            {
                "containers": [
                    {"name": "m", "volumeMounts": [{"name": "x", "mountPath": MOUNT_PATH}]}
                ]
            },
            id="a pod that mounts the path itself",
        ),
    ],
)
def test_is_left_alone(spec: dict[str, Any]) -> None:
    before = pod(**spec)
    assert with_api_access(before, 6443) is before


def test_env_the_pod_sets_itself_wins() -> None:
    mine = {"name": "KUBERNETES_SERVICE_HOST", "value": "api.example"}
    after = with_api_access(pod(containers=[{"name": "m", "env": [mine]}]), 6443)
    assert env_of(after["spec"]["containers"][0])["KUBERNETES_SERVICE_HOST"] == "api.example"
