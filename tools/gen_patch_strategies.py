#!/usr/bin/env python3
"""Generate the strategic-merge-patch table of the Kubernetes core kinds from their OpenAPI.

Strategic merge patch merges a list by the ``x-kubernetes-patch-strategy`` and
``x-kubernetes-patch-merge-key`` that Kubernetes publishes for each field in its OpenAPI
definitions (from the Go struct tags). The local API server needs those for every core kind it
serves; rather than keep them by hand, this script reads the definitions of the Kubernetes
release the server claims (``kubernetes-validate`` ships them) and writes, for every type that
has such a field or leads to one, each field's strategy, merge key and element type, plus which
type is each kind's top level.

Output (committed): ``src/kubetrain/api/patch_strategies.json``, read by
``kubetrain.runtime.smp``. Run ``.venv/bin/python tools/gen_patch_strategies.py``
(``--check`` fails if the committed file is stale).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import generator
from generator import REPO

OUT = REPO / "src" / "kubetrain" / "api" / "patch_strategies.json"
# The release whose API the local engine claims (kubetrain.local.apiserver.discovery.KUBE_VERSION).
VERSION = "1.32.0"


def _ref(schema: dict[str, Any]) -> str | None:
    """The definition a property's value (or list element, or map value) is made of."""
    for node in (schema, schema.get("items") or {}, schema.get("additionalProperties") or {}):
        if isinstance(node, dict) and "$ref" in node:
            return str(node["$ref"]).rsplit("/", 1)[-1]
        for alt in node.get("oneOf") or node.get("anyOf") or () if isinstance(node, dict) else ():
            if isinstance(alt, dict) and "$ref" in alt:
                return str(alt["$ref"]).rsplit("/", 1)[-1]
    return None


def build(defs: dict[str, Any]) -> dict[str, Any]:
    """``{"version", "kinds": {apiVersion/kind: type}, "types": {type: {field: meta}}}``."""
    direct: dict[str, dict[str, dict[str, str]]] = {}
    links: dict[str, dict[str, str]] = {}
    for name, schema in defs.items():
        for field, prop in (schema.get("properties") or {}).items():
            target = _ref(prop)
            strategy = prop.get("x-kubernetes-patch-strategy")
            if strategy:
                meta = {"strategy": strategy}
                if prop.get("x-kubernetes-patch-merge-key"):
                    meta["mergeKey"] = prop["x-kubernetes-patch-merge-key"]
                direct.setdefault(name, {})[field] = meta
            if target is not None:
                links.setdefault(name, {})[field] = target
    # Keep the types with a strategy somewhere below them (a fixed point over the links).
    relevant = set(direct)
    changed = True
    while changed:
        changed = False
        for name, fields in links.items():
            if name not in relevant and any(t in relevant for t in fields.values()):
                relevant.add(name)
                changed = True
    types: dict[str, dict[str, dict[str, str]]] = {}
    for name in sorted(relevant):
        fields: dict[str, dict[str, str]] = {}
        for field in sorted(set(direct.get(name, {})) | set(links.get(name, {}))):
            meta = dict(direct.get(name, {}).get(field, {}))
            target = links.get(name, {}).get(field)
            if target in relevant:
                meta["type"] = target
            if meta:
                fields[field] = meta
        if fields:
            types[name] = fields
    kinds = {}
    for name, schema in sorted(defs.items()):
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            group, version, kind = gvk.get("group", ""), gvk["version"], gvk["kind"]
            if name in types and not name.startswith("io.k8s.apimachinery"):
                kinds[f"{group}/{version}/{kind}" if group else f"{version}/{kind}"] = name
    return {"version": f"v{VERSION}", "kinds": kinds, "types": types}


def render() -> str:
    return json.dumps(build(generator.kube_definitions(VERSION)), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    return generator.main(argv, doc=__doc__, out=OUT.parent, render=lambda: {OUT.name: render()})


if __name__ == "__main__":
    sys.exit(main())
