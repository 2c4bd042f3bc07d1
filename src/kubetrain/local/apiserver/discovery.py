"""Discovery documents: ``/version``, ``/api``, ``/apis`` and the per-group-version resource lists.

Served in the legacy (unaggregated) form; clients that ask for aggregated discovery fall back to
it when the answer's content type says plain ``application/json``.
"""

from __future__ import annotations

from typing import Any

from kubetrain.local.apiserver.resources import VERBS, Registry, ResourceDef

__all__ = [
    "KUBE_VERSION",
    "api_group",
    "api_group_list",
    "api_versions",
    "resource_list",
    "version_info",
]

# The Kubernetes minor version the server claims: kubectl 1.32 is the default client here.
KUBE_VERSION = (1, 32)


def version_info() -> dict[str, Any]:
    major, minor = KUBE_VERSION
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.0+kubetrain",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-11-29T00:00:00Z",
        "goVersion": "python",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in sorted(registry.group_versions().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


# Streaming subresources and the options kind discovery names for each, as kube-apiserver does.
_CONNECT = {
    "attach": "PodAttachOptions",
    "exec": "PodExecOptions",
    "portforward": "PodPortForwardOptions",
}


def _entries(res: ResourceDef) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": res.plural,
        "singularName": res.singular or res.kind.lower(),
        "namespaced": res.namespaced,
        "kind": res.kind,
        "verbs": list(VERBS),
    }
    if res.short_names:
        main["shortNames"] = list(res.short_names)
    if res.categories:
        main["categories"] = list(res.categories)
    out = [main]
    for sub in sorted(res.subresources):
        verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
        entry: dict[str, Any] = {
            "name": f"{res.plural}/{sub}",
            "singularName": "",
            "namespaced": res.namespaced,
            "kind": _CONNECT.get(sub, res.kind),
            # connect subresources: POST (SPDY) and GET (WebSocket)
            "verbs": ["create", "get"] if sub in _CONNECT else verbs,
        }
        if sub == "scale":  # another group's kind, named as kube-apiserver names it
            entry.update(group="autoscaling", version="v1", kind="Scale")
        out.append(entry)
    return out


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = [r for r in registry if r.group == group and r.version == version]
    if not resources:
        return None
    entries = [e for r in resources for e in _entries(r)]
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}
