"""Endpoints and EndpointSlices of Services with a selector, kept from the pods they select.

`service_subsets` and `service_slice` are the pure rules (a Service and pods in, the object's
content out: ready pods as addresses, not-ready ones apart, ports resolved through each pod's
named container ports); `EndpointsController` writes one Endpoints (named as the Service) and
one EndpointSlice (owned by the Service) per Service. The pod network resolves Service names
itself (`executor.endpoints`); these objects are what kubectl and clients read.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.access import as_dict, as_list, list_at, obj_at
from kubetrain.api.types import Obj
from kubetrain.kube.client import ApiError
from kubetrain.kube.kinds import ENDPOINT_SLICE, ENDPOINTS, POD, SERVICE, Kind
from kubetrain.local.executor.jobs import is_terminal

from .loop import Controller, Key, Workloads
from .pods import is_ready, owner_reference

__all__ = ["EndpointsController", "service_slice", "service_subsets"]

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"


def _selector_matches(service: Obj, labels: dict[str, Any]) -> bool:
    """A Service's plain selector (none selects nothing) matches ``labels``."""
    selector = obj_at(service, "spec", "selector")
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _selects(service: Obj, pod: Obj) -> bool:
    meta = obj_at(pod, "metadata")
    same_ns = meta.get("namespace") == obj_at(service, "metadata").get("namespace")
    return same_ns and _selector_matches(service, obj_at(meta, "labels"))


def _members(service: Obj, pods: list[Obj]) -> list[Obj]:
    """Selected pods that have an address and have not ended, by name."""
    out = [
        p for p in pods
        if _selects(service, p) and obj_at(p, "status").get("podIP") and not is_terminal(p)
    ]  # fmt: skip
    return sorted(out, key=lambda p: str(p["metadata"]["name"]))


def _target_port(port: Obj, pod: Obj) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in list_at(pod, "spec", "containers"):
        for cp in as_list(as_dict(c).get("ports")):
            if as_dict(cp).get("name") == target:
                return int(cp["containerPort"])
    return None  # a named port this pod does not have


def _ports(service: Obj, pod: Obj) -> list[Obj]:
    out = []
    for port in list_at(service, "spec", "ports"):
        number = _target_port(as_dict(port), pod)
        if number is None:
            continue
        entry: Obj = {"port": number, "protocol": port.get("protocol") or "TCP"}
        if port.get("name"):
            entry = {"name": port["name"], **entry}
        out.append(entry)
    return out


def _address(pod: Obj) -> Obj:
    meta = obj_at(pod, "metadata")
    out: Obj = {"ip": pod["status"]["podIP"]}
    if obj_at(pod, "spec").get("nodeName"):
        out["nodeName"] = pod["spec"]["nodeName"]
    out["targetRef"] = {
        "kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"),
        "uid": meta.get("uid"),
    }  # fmt: skip
    return out


def _ready(service: Obj, pod: Obj) -> bool:
    publish = bool(obj_at(service, "spec").get("publishNotReadyAddresses"))
    deleting = bool(obj_at(pod, "metadata").get("deletionTimestamp"))
    return publish or (is_ready(pod) and not deleting)


def service_subsets(service: Obj, pods: list[Obj]) -> list[Obj]:
    """An Endpoints' ``subsets``: pods grouped by their resolved ports, ready ones under
    ``addresses``, the others under ``notReadyAddresses``."""
    groups: dict[str, Obj] = {}
    for pod in _members(service, pods):
        ports = _ports(service, pod)
        key = repr(ports)
        subset = groups.setdefault(key, {})
        field = "addresses" if _ready(service, pod) else "notReadyAddresses"
        subset.setdefault(field, []).append(_address(pod))
        subset["ports"] = ports
    out = []
    for subset in groups.values():
        ordered = {
            k: subset[k] for k in ("addresses", "notReadyAddresses", "ports") if subset.get(k)
        }
        out.append(ordered)
    return out


def service_slice(service: Obj, pods: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """An EndpointSlice's ``(endpoints, ports)`` (IPv4; the ports of the first member)."""
    members = _members(service, pods)
    endpoints = []
    for pod in members:
        ready = _ready(service, pod)
        terminating = bool(obj_at(pod, "metadata").get("deletionTimestamp"))
        address = _address(pod)
        entry: Obj = {
            "addresses": [address["ip"]],
            "conditions": {"ready": ready, "serving": is_ready(pod), "terminating": terminating},
            "targetRef": address["targetRef"],
        }
        if "nodeName" in address:
            entry["nodeName"] = address["nodeName"]
        endpoints.append(entry)
    ports = _ports(service, members[0]) if members else []
    return endpoints, ports


class EndpointsController(Controller):
    kind = SERVICE
    watches = (SERVICE, POD, ENDPOINTS, ENDPOINT_SLICE)
    component = "endpoint-controller"

    def __init__(self, shared: Workloads) -> None:
        super().__init__(shared)
        # Each pod's labels as last seen, so a relabelled pod also leaves its old Services.
        self._labels: dict[Key, dict[str, Any]] = {}

    def keys_for(self, kind: Kind, etype: str, obj: Obj) -> list[Key]:
        meta = obj_at(obj, "metadata")
        ns = str(meta.get("namespace") or "")
        if kind in (SERVICE, ENDPOINTS):
            return [(ns, str(meta.get("name")))]
        if kind == ENDPOINT_SLICE:
            name = obj_at(meta, "labels").get(SERVICE_NAME)
            return [(ns, str(name))] if name else []
        # A pod: the Services whose selector matches its labels now or matched them before
        # (a pod whose labels changed must leave the Services it no longer matches).
        labels = obj_at(meta, "labels")
        before = self._labels.pop((ns, str(meta.get("name"))), {})
        if etype != "DELETED":
            self._labels[(ns, str(meta.get("name")))] = labels
        return [
            (ns, str(s["metadata"]["name"]))
            for s in self.cached(SERVICE, ns)
            if _selector_matches(s, labels) or _selector_matches(s, before)
        ]

    async def reconcile(self, key: Key) -> float | None:
        ns, name = key
        service = self.get(key)
        endpoints = self.shared.informers[ENDPOINTS].get(name, ns)
        if service is None:
            if endpoints is not None:
                await self.delete(ENDPOINTS, endpoints)
            return None  # its EndpointSlice is owned by it: garbage collection removes it
        if not obj_at(service, "spec").get("selector"):
            return None  # endpoints kept by hand
        pods = self.cached(POD, ns)
        await self._endpoints(service, endpoints, service_subsets(service, pods))
        await self._slice(service, *service_slice(service, pods))
        return None

    async def _endpoints(self, service: Obj, current: Obj | None, subsets: list[Obj]) -> None:
        meta = service["metadata"]
        labels = dict(obj_at(meta, "labels"))
        if current is None:
            body: Obj = {
                "apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels},
            }  # fmt: skip
            if subsets:
                body["subsets"] = subsets
            try:
                await self.create(ENDPOINTS, body)
            except ApiError as err:
                if not err.conflict:
                    raise
            return
        if as_list(current.get("subsets")) != subsets:
            await self.patch(ENDPOINTS, current, {"subsets": subsets or None})

    async def _slice(self, service: Obj, endpoints: list[Obj], ports: list[Obj]) -> None:
        meta = service["metadata"]
        ns, name = meta["namespace"], meta["name"]
        uid = meta.get("uid")
        mine = [
            s for s in self.cached(ENDPOINT_SLICE, ns)
            if obj_at(s, "metadata", "labels").get(SERVICE_NAME) == name
            and any(r.get("uid") == uid for r in as_list(s["metadata"].get("ownerReferences")))
        ]  # fmt: skip
        if not mine:
            body: Obj = {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "generateName": f"{name}-",
                    "namespace": ns,
                    "labels": {
                        **obj_at(meta, "labels"), SERVICE_NAME: name,
                        MANAGED_BY: SLICE_CONTROLLER,
                    },
                    "ownerReferences": [owner_reference({**service, "apiVersion": "v1", "kind": "Service"})],
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": ports,
            }  # fmt: skip
            await self.create(ENDPOINT_SLICE, body)
            return
        first, *extra = mine
        if as_list(first.get("endpoints")) != endpoints or as_list(first.get("ports")) != ports:
            await self.patch(ENDPOINT_SLICE, first, {"endpoints": endpoints, "ports": ports})
        for other in extra:
            await self.delete(ENDPOINT_SLICE, other)
