"""Builders shared by the API server contract tests."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetrain.kube.client import KubeClient
    from kubetrain.local.apiserver import ApiServer, ServerThread

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


@dataclass
class Cluster:
    kubeconfig: Path
    cache_dir: Path
    server: ApiServer | None  # None when the suite runs against a real cluster
    thread: ServerThread | None

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 30, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            "kubectl",
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done


def namespace_gone(core: Any, name: str, seconds: int = 10) -> bool:
    """Whether namespace ``name`` is removed within ``seconds``: the namespace controller
    finishes a terminating namespace after the request that emptied it, so tests watch for
    the DELETED event rather than reading once."""
    from kubernetes import watch
    from kubernetes.client import ApiException

    try:
        rv = core.read_namespace(name).metadata.resource_version
    except ApiException as err:
        if err.status == 404:
            return True
        raise
    for event in watch.Watch().stream(
        core.list_namespace,
        field_selector=f"metadata.name={name}",
        resource_version=rv,
        timeout_seconds=seconds,
    ):
        if event["type"] == "DELETED":
            return True
    return False


def namespaced_crd(kind: str, plural: str, spec_properties: dict[str, Any]) -> dict[str, Any]:
    """A CRD of the tests' own group ``kt-test.io``, version v1: kind ``kind`` whose ``spec``
    has ``spec_properties``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kt-test.io"},
        "spec": {
            "group": "kt-test.io",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": spec_properties}
                            },
                        }
                    },
                }
            ],
        },
    }


@contextlib.asynccontextmanager
async def own_server(tmp_path: Path, crds: list[dict[str, Any]]) -> AsyncIterator[KubeClient]:
    """A client of a server of the test's own (in memory, plain HTTP, no authentication),
    started with ``crds``: for tests that change what the shared server must keep."""
    from kubetrain.kube.client import connect
    from kubetrain.local.apiserver import ApiServer

    server = ApiServer(tmp_path, crds=crds, in_memory=True, tls=False, auth=False)
    await server.start()
    client = connect(server.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        yield client
    finally:
        await client.close()
        await server.close()
