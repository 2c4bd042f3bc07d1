"""Issue 13, finding 3: one request must not stop the control plane. Kubernetes' size limits
apply, and bad query parameters or deep JSON get a 400 Status, never a 500."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from kubetrain.local.apiserver import ApiServer

MiB = 1024 * 1024


def _request(server: ApiServer, method: str, path: str, **kw: Any) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {server.token}", **kw.pop("headers", {})}
    with httpx2.Client(verify=False, timeout=60) as http:
        return http.request(method, f"{server.url}{path}", headers=headers, **kw)


def _configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


CASES = [
    ("finding 3: a 2 MiB ConfigMap", "POST", "/api/v1/namespaces/default/configmaps",
     {"json": {**_configmap("big"), "data": {"x": "a" * (2 * MiB)}}},
     422, "Too long: must have at most 1048576 bytes"),
    ("finding 3: a body over 3 MiB", "POST", "/api/v1/namespaces/default/configmaps",
     {"json": {**_configmap("huge"), "data": {"x": "a" * (4 * MiB)}}},
     413, "Request entity too large: limit is 3145728"),
    ("finding 3: 300 KiB of annotations", "POST", "/api/v1/namespaces/default/configmaps",
     {"json": _configmap("noted", annotations={"a": "b" * (300 * 1024)})},
     422, "metadata.annotations: Too long: must have at most 262144 bytes"),
    ("finding 3: a negative list limit", "GET", "/api/v1/namespaces/default/configmaps?limit=-5",
     {}, 400, "limit: Invalid value: -5: must be greater than or equal to 0"),
    ("finding 3: JSON nested 100k deep", "POST", "/api/v1/namespaces/default/configmaps",
     {"content": b"[" * 100_000 + b"]" * 100_000, "headers": {"Content-Type": "application/json"}},
     400, "the body nests deeper than 100 levels"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "kw", "code", "message"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_a_hostile_request_gets_a_status_not_a_crash(
    embedded: ApiServer, method: str, path: str, kw: dict[str, Any], code: int, message: str | None
) -> None:
    answer = _request(embedded, method, path, **kw)
    status = answer.json()
    assert (answer.status_code, status["kind"], status["code"]) == (code, "Status", code)
    if message is not None:
        assert message in status["message"]
    # And the server still answers.
    assert _request(embedded, "GET", "/api/v1/namespaces/default/configmaps").status_code == 200


def test_finding_7_a_json_patch_renaming_an_object_is_invalid(embedded: ApiServer) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    assert _request(embedded, "POST", path, json=_configmap("renamed")).status_code == 201
    patch = [{"op": "replace", "path": "/metadata/name", "value": "other"}]
    answer = _request(
        embedded, "PATCH", f"{path}/renamed", json=patch,
        headers={"Content-Type": "application/json-patch+json"},
    )  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert 'metadata.name: Invalid value: "other": field is immutable' in answer.json()["message"]
    assert _request(embedded, "GET", f"{path}/renamed").status_code == 200
    assert _request(embedded, "GET", f"{path}/other").status_code == 404
