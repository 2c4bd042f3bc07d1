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

from kubetrain.local.apiserver.resources import PrinterColumn, ResourceDef
from kubetrain.local.apiserver.scale import selector_text

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
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason") and status.get("phase") not in ("Running",):
            reason = state["terminated"]["reason"]
    return str(reason)


def _pod_restarts(pod: Mapping[str, Any]) -> int:
    return sum(
        int(s.get("restartCount") or 0)
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _data_count(obj: Mapping[str, Any]) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def _event_object(ev: Mapping[str, Any]) -> str:
    ref = ev.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_last_seen(ev: Mapping[str, Any]) -> str:
    return _age(
        ev.get("lastTimestamp")
        or ev.get("eventTime")
        or (ev.get("metadata") or {}).get("creationTimestamp")
    )


def _node_status(node: Mapping[str, Any]) -> str:
    ready = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _ready_of_replicas(obj: Mapping[str, Any]) -> str:
    """``ready/desired`` of a Deployment or StatefulSet (desired defaults to 1)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas")
    return f"{int(status.get('readyReplicas') or 0)}/{1 if desired is None else int(desired)}"


def _job_completions(job: Mapping[str, Any]) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    total = spec.get("completions")
    return f"{int(status.get('succeeded') or 0)}/{1 if total is None else int(total)}"


def _endpoints_addresses(ep: Mapping[str, Any]) -> str:
    """``ip:port,...`` as kubectl shows Endpoints (``<none>`` when empty)."""
    out = []
    for subset in ep.get("subsets") or []:
        ports = [p.get("port") for p in subset.get("ports") or []] or [None]
        for address in subset.get("addresses") or []:
            out += [f"{address.get('ip')}:{p}" if p else str(address.get("ip")) for p in ports]
    return ",".join(out) or "<none>"


_COMPUTED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "ready_of_replicas": _ready_of_replicas,
    "label_selector": selector_text,
    "job_completions": _job_completions,
    "endpoints_addresses": _endpoints_addresses,
    "node_status": _node_status,
    "pod_ready": _pod_ready,
    "pod_status": _pod_status,
    "pod_restarts": _pod_restarts,
    "data_count": _data_count,
    "sa_secrets": lambda o: len(o.get("secrets") or []),
    "event_object": _event_object,
    "event_last_seen": _event_last_seen,
}


def _status_count(field: str) -> Callable[[Mapping[str, Any]], Any]:
    """A count in a workload's status, shown as 0 when left out (as its printer does)."""
    return lambda obj: int((obj.get("status") or {}).get(field) or 0)


_COMPUTED.update(
    (f"status.{field}", _status_count(field))
    for field in (
        "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
        "currentNumberScheduled", "desiredNumberScheduled", "numberReady",
    )
)  # fmt: skip


def _cell(obj: Mapping[str, Any], column: PrinterColumn) -> Any:
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
        name = (obj.get("metadata") or {}).get("name", "")
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
