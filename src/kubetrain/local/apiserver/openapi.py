"""OpenAPI v3 documents, enough for kubectl.

kubectl (1.27+) asks ``/openapi/v3`` whether a kind's PATCH takes ``fieldValidation``; when it
does, kubectl leaves schema validation to the server (``fieldValidation=Strict``) instead of
downloading the protobuf ``/openapi/v2`` document, which this server does not serve. The kind
schemas (the CRD's ``openAPIV3Schema`` for custom kinds) also make ``kubectl explain`` work.
PATCH bodies are declared without strategic merge so kubectl uses merge patches for custom kinds
and its own built-in strategic merge for core kinds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubetrain.local.apiserver.resources import Registry, ResourceDef

__all__ = ["OpenAPI"]

_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)


def _schema_name(res: ResourceDef) -> str:
    group = ".".join(reversed(res.group.split("."))) if res.group else "io.k8s.api.core"
    return f"{group}.{res.version}.{res.kind}"


def _gvk(res: ResourceDef) -> dict[str, str]:
    return {"group": res.group, "version": res.version, "kind": res.kind}


def _operation(res: ResourceDef, action: str, verb: str) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    ]
    if verb in ("post", "put", "patch"):
        params.append(
            {
                "name": "fieldValidation",
                "in": "query",
                "schema": {"type": "string", "uniqueItems": True},
            }
        )
    op: dict[str, Any] = {
        "operationId": f"{action}{res.kind}",
        "parameters": params,
        "responses": {
            "200": {
                "description": "OK",
                "content": {
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{_schema_name(res)}"}
                    }
                },
            }
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(res),
    }
    if verb == "patch":
        op["requestBody"] = {
            "content": {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES},
            "required": True,
        }
    elif verb in ("post", "put"):
        op["requestBody"] = {
            "content": {
                "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{_schema_name(res)}"}
                }
            },
            "required": True,
        }
    return op


def _paths(res: ResourceDef) -> dict[str, Any]:
    prefix = f"/apis/{res.group}/{res.version}" if res.group else "/api/v1"
    collection = (
        f"{prefix}/namespaces/{{namespace}}/{res.plural}"
        if res.namespaced
        else f"{prefix}/{res.plural}"
    )
    item = f"{collection}/{{name}}"
    out = {
        collection: {
            "get": _operation(res, "list", "get"),
            "post": _operation(res, "post", "post"),
        },
        item: {
            "get": _operation(res, "get", "get"),
            "put": _operation(res, "put", "put"),
            "patch": _operation(res, "patch", "patch"),
            "delete": _operation(res, "delete", "delete"),
        },
    }
    if "status" in res.subresources:
        out[f"{item}/status"] = {
            "get": _operation(res, "get", "get"),
            "put": _operation(res, "put", "put"),
            "patch": _operation(res, "patch", "patch"),
        }
    return out


def _kind_schema(res: ResourceDef) -> dict[str, Any]:
    if res.schema is not None:
        schema = dict(res.schema)
    else:
        schema = {
            "type": "object",
            "description": f"{res.kind} ({res.api_version}).",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object"},
                "status": {"type": "object"},
            },
        }
    schema["x-kubernetes-group-version-kind"] = [_gvk(res)]
    return schema


class OpenAPI:
    """Builds the v3 index and per-group-version documents once, as serialised JSON."""

    def __init__(self, registry: Registry) -> None:
        self._docs: dict[str, bytes] = {}
        by_gv: dict[str, list[ResourceDef]] = {}
        for res in registry:
            key = f"apis/{res.group}/{res.version}" if res.group else "api/v1"
            by_gv.setdefault(key, []).append(res)
        for key, resources in by_gv.items():
            paths: dict[str, Any] = {}
            schemas: dict[str, Any] = {}
            for res in resources:
                paths.update(_paths(res))
                schemas[_schema_name(res)] = _kind_schema(res)
            doc = {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": "v1.32.0+kubetrain"},
                "paths": paths,
                "components": {"schemas": schemas},
            }
            self._docs[key] = json.dumps(doc, separators=(",", ":")).encode()
        index = {
            "paths": {
                key: {
                    "serverRelativeURL": f"/openapi/v3/{key}?hash={hashlib.sha256(body).hexdigest()[:32].upper()}"
                }
                for key, body in sorted(self._docs.items())
            }
        }
        self.index = json.dumps(index).encode()

    def document(self, key: str) -> bytes | None:
        return self._docs.get(key.strip("/"))
