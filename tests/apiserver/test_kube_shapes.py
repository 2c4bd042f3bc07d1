"""Answers shaped as kube-apiserver's: Status bodies, DELETE answers per kind, namespace
termination and the default ServiceAccount (what the official client's e2e suite compares)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from apiserver_support import namespace_gone

CM = {"metadata": {"name": "cm"}, "data": {"a": "b"}}


def _raw(api_client: Any, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    """Status and body bytes exactly as sent (no JSON parsing in between)."""
    from kubernetes.client import ApiException

    try:
        response = api_client.call_api(
            path,
            method,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )[0]
    except ApiException as err:
        return int(err.status), err.body if isinstance(err.body, bytes) else err.body.encode()
    return int(response.status), bytes(response.data)


def test_a_conflict_status_is_byte_for_byte_kube_apiservers(api_client: Any, ns: str) -> None:
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"
    role = {"metadata": {"name": "r"}, "rules": []}
    assert _raw(api_client, "POST", path, role)[0] == 201
    assert _raw(api_client, "POST", path, role) == (
        409,
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"roles.rbac.authorization.k8s.io \\"r\\" already exists",'
        b'"reason":"AlreadyExists","details":{"name":"r","group":"rbac.authorization.k8s.io",'
        b'"kind":"roles"},"code":409}\n',
    )


@pytest.mark.parametrize(
    ("plural", "body", "answer"),
    [
        ("configmaps", CM, "Status"),
        ("secrets", {"metadata": {"name": "s"}}, "Status"),
        ("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "Pod"),
        ("services", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}, "Service"),
        ("serviceaccounts", {"metadata": {"name": "sa"}}, "ServiceAccount"),
    ],
    ids=[
        "a config map's delete answers with a Success Status",
        "a secret's delete answers with a Success Status",
        "a pod's delete answers with the pod",
        "a service's delete answers with the service",
        "a service account's delete answers with the account",
    ],
)  # fmt: skip
def test_delete_answers_as_the_kinds_registry_does(
    api_client: Any, ns: str, plural: str, body: dict[str, Any], answer: str
) -> None:
    path = f"/api/v1/namespaces/{ns}/{plural}"
    code, created = _raw(api_client, "POST", path, body)
    assert code == 201, created
    uid = json.loads(created)["metadata"]["uid"]
    code, raw = _raw(api_client, "DELETE", f"{path}/{body['metadata']['name']}")
    assert code == 200 and raw.endswith(b"}\n")
    deleted = json.loads(raw)
    assert deleted["kind"] == answer
    if answer == "Status":
        assert deleted == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": body["metadata"]["name"], "kind": plural, "uid": uid},
        }


def test_every_new_namespace_gets_a_default_service_account(core: Any, ns: str) -> None:
    assert core.read_namespaced_service_account("default", ns).metadata.name == "default"


def test_a_deleted_default_service_account_is_put_back(core: Any, ns: str) -> None:
    first = core.read_namespaced_service_account("default", ns).metadata.uid
    core.delete_namespaced_service_account("default", ns)
    assert core.read_namespaced_service_account("default", ns).metadata.uid != first


def test_a_deleted_namespace_answers_terminating_then_goes(api_client: Any, core: Any) -> None:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, CM)
    code, raw = _raw(api_client, "DELETE", f"/api/v1/namespaces/{name}")
    answer = json.loads(raw)
    assert (code, answer["kind"], answer["status"]["phase"]) == (200, "Namespace", "Terminating")
    assert answer["metadata"]["deletionTimestamp"]
    assert answer["spec"]["finalizers"] == ["kubernetes"]
    assert namespace_gone(core, name)


def test_a_delete_through_events_k8s_io_names_that_group(api_client: Any, ns: str) -> None:
    path = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
    event = {
        "metadata": {"name": "e"},
        "eventTime": "2026-12-01T10:00:00.000000Z",
        "reportingController": "test",
        "reportingInstance": "test-1",
        "action": "Testing",
        "reason": "Tested",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
    }
    code, created = _raw(api_client, "POST", path, event)
    assert code == 201, created
    code, raw = _raw(api_client, "DELETE", f"{path}/e")
    details = json.loads(raw)["details"]
    assert (code, details["name"], details["group"], details["kind"]) == (
        200,
        "e",
        "events.k8s.io",
        "events",
    )
