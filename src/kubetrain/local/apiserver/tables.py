"""Server-side printing: ``meta.k8s.io/v1`` Table answers for ``kubectl get``.

Custom kinds use their CRD's ``additionalPrinterColumns``; core kinds use the columns declared
in the resource table (computed cells for pods, config maps, events). Date columns are printed
as ages, the way kubectl shows them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import as_list, dicts, list_at, obj_at
from kubetrain.local.apiserver.resources import PrinterColumn, ResourceDef
from kubetrain.local.apiserver.selectors import selector_text

__all__ = ["human_duration", "jsonpath", "table", "wants_table"]

_TOKEN = re.compile(
    r"""\.([A-Za-z0-9_\-$]+)|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["']([^"']*)["']\)\]|\[(-?\d*):(-?\d*)\]|\[(-?\d+)\]|\[\*\]|\[['"]([^'"]+)['"]\]"""
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    """The subset of JSONPath printer columns use: ``.a.b``, ``[0]``, ``[-1:]``, ``[*]``, ``[?(@.k=="v")]``."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        key, fkey, fval, lo, hi, idx, quoted = m.groups()
        for value in current:
            if key is not None or quoted is not None:
                if isinstance(value, Mapping) and (key or quoted) in value:
                    nxt.append(value[key or quoted])
            elif fkey is not None:
                if isinstance(value, list):
                    nxt += [v for v in value if str(_dig(v, fkey.split("."))) == fval]
            elif idx is not None:
                if isinstance(value, list) and -len(value) <= int(idx) < len(value):
                    nxt.append(value[int(idx)])
            elif lo is not None or hi is not None:
                if isinstance(value, list):
                    nxt += value[int(lo) if lo else None : int(hi) if hi else None]
            elif isinstance(value, list):  # [*]
                nxt += value
        current = nxt
    return current


def _dig(obj: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def human_duration(seconds: float) -> str:
    """Kubernetes' ``HumanDuration``: 45s, 3m20s, 15m, 5h3m, 2d4h, 300d, 3y10d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def _age(ts: Any) -> str:
    if not isinstance(ts, str) or not ts:
        return "<unknown>"
    try:
        when = datetime.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - when).total_seconds())


def _pod_ready(pod: Mapping[str, Any]) -> str:
    statuses = dicts(obj_at(pod, "status").get("containerStatuses"))
    total = len(list_at(pod, "spec", "containers"))
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(pod: Mapping[str, Any]) -> str:
    status = obj_at(pod, "status")
    if obj_at(pod, "metadata").get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in dicts(status.get("containerStatuses")):
        state = obj_at(cs, "state")
        if obj_at(state, "waiting").get("reason"):
            reason = state["waiting"]["reason"]
        elif obj_at(state, "terminated").get("reason") and status.get("phase") not in ("Running",):
            reason = state["terminated"]["reason"]
    return str(reason)


def _pod_restarts(pod: Mapping[str, Any]) -> int:
    return sum(
        int(s.get("restartCount") or 0)
        for s in dicts(obj_at(pod, "status").get("containerStatuses"))
    )


def _data_count(obj: Mapping[str, Any]) -> int:
    return len(obj_at(obj, "data")) + len(obj_at(obj, "binaryData"))


def _event_object(ev: Mapping[str, Any]) -> str:
    ref = obj_at(ev, "involvedObject")
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_last_seen(ev: Mapping[str, Any]) -> str:
    return _age(
        ev.get("lastTimestamp")
        or ev.get("eventTime")
        or obj_at(ev, "metadata").get("creationTimestamp")
    )


def _node_status(node: Mapping[str, Any]) -> str:
    ready = next(
        (c for c in dicts(obj_at(node, "status").get("conditions")) if c.get("type") == "Ready"),
        None,
    )
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if obj_at(node, "spec").get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _count(obj: Mapping[str, Any], path: str) -> int:
    found = jsonpath(obj, path)
    return int(found[0]) if found and isinstance(found[0], int) else 0


def _ready_of_replicas(obj: Mapping[str, Any]) -> str:
    # Deployments and StatefulSets: ready/desired, desired defaulting to 1 as the API does.
    desired = obj_at(obj, "spec").get("replicas")
    return f"{_count(obj, '.status.readyReplicas')}/{1 if desired is None else desired}"


def _pod_template(obj: Mapping[str, Any]) -> dict[str, Any]:
    return obj_at(obj, "spec", "template", "spec")


def _containers(obj: Mapping[str, Any]) -> str:
    return ",".join(str(c.get("name", "")) for c in dicts(_pod_template(obj).get("containers")))


def _images(obj: Mapping[str, Any]) -> str:
    return ",".join(str(c.get("image", "")) for c in dicts(_pod_template(obj).get("containers")))


def _job_status(job: Mapping[str, Any]) -> str:
    conditions = {
        c.get("type"): c.get("status") for c in dicts(obj_at(job, "status").get("conditions"))
    }
    for kind, text in (
        ("Complete", "Complete"),
        ("Failed", "Failed"),
        ("FailureTarget", "FailureTarget"),
        ("SuccessCriteriaMet", "SuccessCriteriaMet"),
        ("Suspended", "Suspended"),
    ):
        if conditions.get(kind) == "True":
            return text
    return "Terminating" if obj_at(job, "metadata").get("deletionTimestamp") else "Running"


def _job_completions(job: Mapping[str, Any]) -> str:
    spec = obj_at(job, "spec")
    succeeded = _count(job, ".status.succeeded")
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = spec.get("parallelism")
    if parallelism is not None and parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _job_duration(job: Mapping[str, Any]) -> str:
    status = obj_at(job, "status")
    start = _parse_time(status.get("startTime"))
    if start is None:
        return ""
    end = _parse_time(status.get("completionTime")) or datetime.now(UTC)
    return human_duration((end - start).total_seconds())


def _parse_time(ts: Any) -> datetime | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _more(items: list[str], shown: int = 3) -> str:
    if not items:
        return "<none>"
    text = ",".join(items[:shown])
    return text + (f" + {len(items) - shown} more..." if len(items) > shown else "")


def _endpoints(ep: Mapping[str, Any]) -> str:
    found = []
    for subset in dicts(ep.get("subsets")):
        ports = [p.get("port") for p in dicts(subset.get("ports"))] or [None]
        for address in dicts(subset.get("addresses")):
            for port in ports:
                ip = address.get("ip", "")
                found.append(ip if port is None else f"{ip}:{port}")
    return _more(found)


def _slice_ports(sl: Mapping[str, Any]) -> str:
    ports = [str(p.get("port")) for p in dicts(sl.get("ports")) if p.get("port") is not None]
    return ",".join(ports) if ports else "<unset>"


def _slice_endpoints(sl: Mapping[str, Any]) -> str:
    return _more([str(a) for e in dicts(sl.get("endpoints")) for a in as_list(e.get("addresses"))])


def _binding_subjects(kind: str) -> Callable[[Mapping[str, Any]], str]:
    def cell(binding: Mapping[str, Any]) -> str:
        names = []
        for s in dicts(binding.get("subjects")):
            if s.get("kind") != kind:
                continue
            ns = s.get("namespace")
            names.append(
                f"{ns}/{s.get('name')}" if kind == "ServiceAccount" and ns else str(s.get("name"))
            )
        return ", ".join(names)

    return cell


def _apiservice_available(svc: Mapping[str, Any]) -> str:
    for c in dicts(obj_at(svc, "status").get("conditions")):
        if c.get("type") == "Available":
            if c.get("status") == "True":
                return "True"
            return f"{c.get('status')} ({c.get('reason', '')})"
    return "Unknown"


def _apiservice_service(svc: Mapping[str, Any]) -> str:
    ref = obj_at(svc, "spec", "service")
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else "Local"


def _service_ports(svc: Mapping[str, Any]) -> str:
    out = []
    for p in dicts(obj_at(svc, "spec").get("ports")):
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        out.append(f"{p.get('port')}{node}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) or "<none>"


def _service_external_ips(svc: Mapping[str, Any]) -> str:
    spec = obj_at(svc, "spec")
    ingress = dicts(obj_at(svc, "status", "loadBalancer").get("ingress"))
    ips = list(as_list(spec.get("externalIPs")))
    ips += [str(i.get("ip") or i.get("hostname")) for i in ingress]
    if spec.get("type") == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    if ips:
        return ",".join(ips)
    return "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"


_COMPUTED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "service_ports": _service_ports,
    "service_external_ips": _service_external_ips,
    "service_selector": lambda o: selector_text(obj_at(o, "spec").get("selector")),
    "ready_of_replicas": _ready_of_replicas,
    "desired_replicas": lambda o: (
        _count(o, ".spec.replicas") if "replicas" in obj_at(o, "spec") else 1
    ),
    "containers": _containers,
    "images": _images,
    "selector": lambda o: selector_text(obj_at(o, "spec").get("selector")),
    "node_selector": lambda o: selector_text(_pod_template(o).get("nodeSelector")),
    "job_status": _job_status,
    "job_completions": _job_completions,
    "job_duration": _job_duration,
    "endpoints": _endpoints,
    "slice_ports": _slice_ports,
    "slice_endpoints": _slice_endpoints,
    "created_at": lambda o: str(obj_at(o, "metadata").get("creationTimestamp", "")),
    "binding_role": lambda o: (
        f"{obj_at(o, 'roleRef').get('kind')}/{obj_at(o, 'roleRef').get('name')}"
    ),
    "binding_users": _binding_subjects("User"),
    "binding_groups": _binding_subjects("Group"),
    "binding_service_accounts": _binding_subjects("ServiceAccount"),
    "apiservice_service": _apiservice_service,
    "apiservice_available": _apiservice_available,
    "node_status": _node_status,
    "pod_ready": _pod_ready,
    "pod_status": _pod_status,
    "pod_restarts": _pod_restarts,
    "data_count": _data_count,
    "sa_secrets": lambda o: len(as_list(o.get("secrets"))),
    "event_object": _event_object,
    "event_last_seen": _event_last_seen,
}


def _cell(obj: Mapping[str, Any], column: PrinterColumn) -> Any:
    if column.computed.startswith("count:"):
        # A number kubectl prints as 0 when unset (Go's zero value), unlike a CRD column.
        return _count(obj, column.computed[len("count:") :])
    if column.computed:
        return _COMPUTED[column.computed](obj)
    found = jsonpath(obj, column.json_path)
    if not found:
        return "<none>" if column.type != "date" else "<unknown>"
    value = found[0] if len(found) == 1 else ",".join(str(v) for v in found)
    if column.type == "date":
        return _age(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def wants_table(accept: str) -> bool:
    """True when the client asks for ``as=Table`` (kubectl get does)."""
    return "as=Table" in accept.replace(" ", "")


def _partial(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table(
    res: ResourceDef,
    objects: Sequence[Mapping[str, Any]],
    list_meta: Mapping[str, Any],
    include: str = "Metadata",
) -> dict[str, Any]:
    """A Table of ``objects``; ``include`` is the request's ``includeObject`` (None|Metadata|Object)."""
    name_first = res.kind != "Event"
    columns = list(res.printer_columns)
    definitions = []
    if name_first:
        definitions.append(
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name must be unique within a namespace.",
                "priority": 0,
            }
        )
    for c in columns:
        definitions.append(
            {
                "name": c.name,
                "type": c.type,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            }
        )
    if not name_first:
        definitions.append(
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 1}
        )
    rows = []
    for obj in objects:
        cells: list[Any] = [_cell(obj, c) for c in columns]
        name = obj_at(obj, "metadata").get("name", "")
        cells = [name, *cells] if name_first else [*cells, name]
        row: dict[str, Any] = {"cells": cells}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta),
        "columnDefinitions": definitions,
        "rows": rows,
    }
