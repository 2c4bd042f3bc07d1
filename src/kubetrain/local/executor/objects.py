"""Small builders for the objects the executor writes besides Pods: Events, and the names of
the ConfigMaps, Secrets and token audiences a pod refers to."""

from __future__ import annotations

import random
import time
from typing import Any

from kubetrain.api.access import dicts, obj_at

__all__ = ["make_event", "pod_references", "random_suffix"]

# The alphabet Kubernetes uses for generateName suffixes: no vowels, no look-alikes.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(rng: random.Random | None = None) -> str:
    r = rng or random
    return "".join(r.choice(_ALPHABET) for _ in range(5))


def make_event(
    involved: dict[str, Any],
    etype: str,
    reason: str,
    message: str,
    *,
    now: str,
    component: str,
    host: str = "",
    field_path: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event with ``firstTimestamp`` (the official SDK drops events without it)."""
    meta = obj_at(involved, "metadata")
    name = str(meta.get("name", ""))
    ref: dict[str, Any] = {
        "apiVersion": involved.get("apiVersion", "v1"),
        "kind": involved.get("kind", ""),
        "name": name,
        "namespace": meta.get("namespace", "default"),
        "uid": meta.get("uid", ""),
    }
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    if field_path:
        ref["fieldPath"] = field_path
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # client-go names events <object>.<nanoseconds in hex>.
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": ref["namespace"]},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": etype,
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }


def pod_references(pod: dict[str, Any]) -> tuple[set[str], set[str], set[str]]:
    """(ConfigMap names, Secret names, token audiences) the pod's volumes and env name."""
    spec = obj_at(pod, "spec")
    cms: set[str] = set()
    secrets: set[str] = set()
    audiences: set[str] = set()
    for vol in dicts(spec.get("volumes")):
        if "configMap" in vol:
            cms.add(str(vol["configMap"].get("name", "")))
        if "secret" in vol:
            secrets.add(str(vol["secret"].get("secretName", "")))
        for src in dicts(obj_at(vol, "projected").get("sources")):
            if "configMap" in src:
                cms.add(str(src["configMap"].get("name", "")))
            if "secret" in src:
                secrets.add(str(src["secret"].get("name", "")))
            if "serviceAccountToken" in src:
                audiences.add(str(src["serviceAccountToken"].get("audience") or ""))
    for c in [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]:
        for env in dicts(c.get("env")):
            source = obj_at(env, "valueFrom")
            if "configMapKeyRef" in source:
                cms.add(str(source["configMapKeyRef"].get("name", "")))
            if "secretKeyRef" in source:
                secrets.add(str(source["secretKeyRef"].get("name", "")))
        for env_from in dicts(c.get("envFrom")):
            if "configMapRef" in env_from:
                cms.add(str(env_from["configMapRef"].get("name", "")))
            if "secretRef" in env_from:
                secrets.add(str(env_from["secretRef"].get("name", "")))
    cms.discard("")
    secrets.discard("")
    return cms, secrets, audiences
