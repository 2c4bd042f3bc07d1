#!/usr/bin/env python3
"""Generate the OpenAPI schemas of the core kinds the local API server serves.

``/openapi/v3`` describes each served kind so that ``kubectl explain`` and clients that read the
document find the fields. For the core kinds (Pods, Deployments, RBAC, ...) the schemas are
Kubernetes' own, from the OpenAPI definitions of the release the server claims (shipped by
``kubernetes-validate``): every definition reachable from a served core kind, field
descriptions left out (size), the JSON-schema forms of that package turned back into OpenAPI
(``type: [string, "null"]`` → ``type: string``; IntOrString as ``int-or-string``).

Output (committed): ``src/kubetrain/api/core_openapi.json``, read by
``kubetrain.local.apiserver.openapi``. Run ``.venv/bin/python tools/gen_core_openapi.py``
(``--check`` fails if the committed file is stale).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import generator
from generator import REPO

OUT = REPO / "src" / "kubetrain" / "api" / "core_openapi.json"
VERSION = "1.32.0"  # kubetrain.local.apiserver.discovery.KUBE_VERSION
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


def _openapi(node: Any) -> Any:
    if isinstance(node, list):
        return [_openapi(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            value = kinds[0] if len(kinds) == 1 else kinds
        elif key == "$ref":
            value = "#/components/schemas/" + str(value).rsplit("/", 1)[-1]
        elif key == "properties":
            value = {name: _openapi(prop) for name, prop in value.items()}
            out[key] = value
            continue
        out[key] = _openapi(value)
    return out


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        # JSONSchemaProps has a property named $ref: only a string is a reference.
        found = [str(node["$ref"]).rsplit("/", 1)[-1]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def build(defs: dict[str, Any]) -> dict[str, Any]:
    from kubetrain.local.apiserver.resources import BUILTIN_RESOURCES

    served = {(r.group, r.version, r.kind) for r in BUILTIN_RESOURCES if not r.custom}
    kinds: dict[str, str] = {}
    for name, schema in sorted(defs.items()):
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            key = (gvk.get("group", ""), gvk["version"], gvk["kind"])
            if key in served:
                kinds["/".join(p for p in key if p)] = name
    seen: set[str] = set()
    stack = list(kinds.values())
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(_refs(defs[name]))
    schemas = {name: _openapi(defs[name]) for name in sorted(seen)}
    if _INT_OR_STRING in schemas:
        schemas[_INT_OR_STRING] = {"type": "string", "format": "int-or-string"}
    return {"version": f"v{VERSION}", "kinds": kinds, "schemas": schemas}


def render() -> str:
    return (
        json.dumps(
            build(generator.kube_definitions(VERSION)), separators=(",", ":"), sort_keys=True
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    return generator.main(argv, doc=__doc__, out=OUT.parent, render=lambda: {OUT.name: render()})


if __name__ == "__main__":
    sys.exit(main())
