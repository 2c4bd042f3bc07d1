"""Builders shared by the API server contract tests."""

from __future__ import annotations

from typing import Any

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def trainjob(
    name: str = "", *, generate_name: str = "", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A valid TrainJob body; ``spec`` keys override the defaults."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": generate_name}
    if labels:
        meta["labels"] = labels
    body_spec: dict[str, Any] = {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 1},
    }
    body_spec.update(spec)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "spec": body_spec,
    }


def condition(kind: str = "Complete", status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": "JobCompleted",
        "message": "done",
        "lastTransitionTime": "2026-11-29T10:00:00Z",
    }


def kube_request(
    api_client: Any,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
) -> tuple[int, Any, Any]:
    """One raw request through the official client's transport (auth, TLS) → (status, JSON, headers).

    The client's typed custom-object PATCH only sends merge patches in this release; JSON patch
    and apply go through here. Errors raise ``ApiException`` as usual.
    """
    import json

    response = api_client.call_api(
        path,
        method,
        query_params=query or [],
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )[0]
    data = response.data
    return response.status, json.loads(data) if data else None, response.headers
