"""Container environment as the kubelet builds it: envFrom, env, fieldRefs, ``$(VAR)``.

Order (kubelet's): envFrom sources in list order, then ``env`` entries in list order, each
later definition replacing an earlier one. An ``env`` value may refer to anything defined
before it; command and args see the finished environment.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

from kubetrain.api.access import dicts, obj_at

from .context import SandboxContext
from .errors import SandboxError

__all__ = ["expand", "field_ref", "resolve_env"]

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion.

    ``$(VAR)`` becomes VAR's value when VAR is defined and stays as written when not; ``$$``
    is an escaped ``$``; a ``$`` before anything else, or an unclosed ``$(``, stays literal.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def field_ref(pod: Mapping[str, Any], path: str, ctx: SandboxContext) -> str:
    """The downward-API value of ``fieldPath`` for this pod (missing label/annotation → "")."""
    meta = obj_at(pod, "metadata")
    spec = obj_at(pod, "spec")
    simple: dict[str, str] = {
        "metadata.name": str(meta.get("name", "")),
        "metadata.namespace": str(meta.get("namespace") or "default"),
        "metadata.uid": str(meta.get("uid", "")),
        "spec.nodeName": str(spec.get("nodeName") or ctx.node_name),
        "spec.serviceAccountName": str(spec.get("serviceAccountName") or "default"),
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if path in simple:
        return simple[path]
    m = _SUBSCRIPT.match(path)
    if m:
        return str(obj_at(meta, m.group(1)).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted(obj_at(meta, path.split(".")[1]).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    raise SandboxError(f"unsupported fieldRef fieldPath {path!r}")


# Binary and decimal suffixes of Kubernetes quantities, as multipliers.
_SUFFIX = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18,
}  # fmt: skip
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)


def _quantity(text: str) -> float:
    m = _QUANTITY.match(str(text).strip())
    if not m:
        raise SandboxError(f"invalid quantity {text!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def _resource_ref(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    # Limits that are not set default to what the node has, as on a cluster.
    resource = str(ref.get("resource", ""))
    kind, _, name = resource.partition(".")
    resources = obj_at(container, "resources")
    value = obj_at(resources, kind).get(name)
    if value is None and kind == "requests":
        value = obj_at(resources, "limits").get(name)
    if value is None:
        if name == "cpu":
            amount = float(os.cpu_count() or 1)
        elif name in ("memory", "ephemeral-storage"):
            amount = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        else:
            amount = 0.0
    else:
        amount = _quantity(str(value))
    divisor = _quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(amount / divisor - 1e-12))


def _data_value(
    kind: str, source: Mapping[str, Mapping[str, bytes | str]], ref: Mapping[str, Any]
) -> str | None:
    name, key = str(ref.get("name", "")), str(ref.get("key", ""))
    data = source.get(name)
    if data is None or key not in data:
        if ref.get("optional"):
            return None
        what = f"{kind} {name!r}" if data is None else f"key {key!r} in {kind} {name!r}"
        raise SandboxError(f"{what} not found")
    value = data[key]
    return value.decode() if isinstance(value, bytes) else value


def resolve_env(
    pod: Mapping[str, Any], container: Mapping[str, Any], ctx: SandboxContext
) -> dict[str, str]:
    """The container's own variables (not the base env), resolved and expanded."""
    env: dict[str, str] = {}
    store: Mapping[str, Mapping[str, bytes | str]]
    for source in dicts(container.get("envFrom")):
        prefix = str(source.get("prefix") or "")
        if "configMapRef" in source:
            kind, ref, store = "configmap", source["configMapRef"], ctx.config_maps
        elif "secretRef" in source:
            kind, ref, store = "secret", source["secretRef"], ctx.secrets
        else:
            continue
        name = str(ref.get("name", ""))
        data = store.get(name)
        if data is None:
            if ref.get("optional"):
                continue
            raise SandboxError(f"{kind} {name!r} not found")
        for key, raw in data.items():
            env[prefix + key] = raw.decode() if isinstance(raw, bytes) else raw
    for var in dicts(container.get("env")):
        name = str(var["name"])
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value") or ""), env)
            continue
        src = var["valueFrom"]
        value: str | None = None
        if "fieldRef" in src:
            value = field_ref(pod, str(src["fieldRef"]["fieldPath"]), ctx)
        elif "resourceFieldRef" in src:
            value = _resource_ref(container, src["resourceFieldRef"])
        elif "configMapKeyRef" in src:
            value = _data_value("configmap", ctx.config_maps, src["configMapKeyRef"])
        elif "secretKeyRef" in src:
            value = _data_value("secret", ctx.secrets, src["secretKeyRef"])
        else:
            raise SandboxError(f"env {name}: unsupported valueFrom {sorted(src)}")
        if value is not None:
            env[name] = value
    return env
