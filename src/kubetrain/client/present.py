"""The kubectl-like rows of TrainJobs, runtimes, pods and events, as plain strings.

The CLI and the dashboard show the same columns, and the dashboard may not import the CLI, so the
rows are built here; printing them (tables, colours, YAML/JSON, the error boundary) is the CLI's,
in :mod:`kubetrain.cli.present`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubetrain.api.access import dicts, list_at, obj_at
from kubetrain.client.steps import pod_summary
from kubetrain.client.view import JobView, age

__all__ = [
    "eta",
    "event_rows",
    "key_metric",
    "pod_row",
    "runtime_row",
    "trainjob_headers",
    "trainjob_row",
]


def eta(seconds: Any) -> str:
    """``3d04h``/``1h02m``/``3m05s``/``12s`` for a remaining-seconds value; ``-`` when unknown
    (or not a sane number: a stored value from before the bounds, NaN, negative)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return "-"
    if not 0 <= seconds < 2**31:
        return "-"
    s = int(seconds)
    if s >= 2 * 86400:
        return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def key_metric(progress: dict[str, Any]) -> tuple[str, str] | None:
    """The headline metric of ``status.trainerStatus``: the first one the training code sent.

    Training code lists its metrics in the order it cares about them (loss first, by habit), so
    the first is what a one-column summary shows.
    """
    for m in dicts(progress.get("metrics")):
        if m.get("name"):
            return str(m["name"]), str(m.get("value"))
    return None


def trainjob_headers(*, wide: bool, all_namespaces: bool) -> list[str]:
    # PROGRESS/ETA come from status.trainerStatus, written only when training code reports it.
    headers = ["NAME", "STATE", "RUNTIME", "NODES", "PROGRESS", "ETA", "AGE"]
    if wide:
        headers += ["STEPS", "MESSAGE"]
    return (["NAMESPACE"] if all_namespaces else []) + headers


def trainjob_row(
    view: JobView, *, wide: bool, all_namespaces: bool, now: datetime | None = None
) -> list[str]:
    progress = view.progress.get("progressPercentage")
    row = [
        view.name,
        view.state,
        view.runtime_name,
        str(view.num_nodes) if view.num_nodes is not None else "-",
        f"{progress}%" if isinstance(progress, int) else "-",
        eta(view.progress.get("estimatedRemainingSeconds")),
        age(view.created, now),
    ]
    if wide:
        running = sum(1 for s in view.steps if s.phase == "Running")
        row += [
            f"{running}/{len(view.steps)} running" if view.steps else "-",
            view.message or "-",
        ]
    return ([view.namespace] if all_namespaces else []) + row


def runtime_row(obj: dict[str, Any], *, show_kind: bool, now: datetime | None = None) -> list[str]:
    from kubetrain.api.labels import FRAMEWORK_LABEL

    meta = obj_at(obj, "metadata")
    nodes = obj_at(obj, "spec", "mlPolicy").get("numNodes")
    row = [
        str(meta.get("name")),
        str(obj_at(meta, "labels").get(FRAMEWORK_LABEL, "-")),
        str(nodes) if nodes is not None else "-",
        age(meta.get("creationTimestamp"), now),
    ]
    return [row[0], str(obj.get("kind")), *row[1:]] if show_kind else row


def pod_row(pod: dict[str, Any], *, wide: bool, now: datetime | None = None) -> list[str]:
    meta = obj_at(pod, "metadata")
    status = obj_at(pod, "status")
    restarts, exit_code, reason = pod_summary(pod)
    statuses = list_at(status, "containerStatuses")
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len(list_at(pod, "spec", "containers")) or len(statuses)
    # kubectl shows the container's waiting/terminated reason when there is one, else the phase.
    shown = (
        reason
        if reason and status.get("phase") != "Running"
        else str(status.get("phase") or "Pending")
    )
    if meta.get("deletionTimestamp"):
        shown = "Terminating"
    row = [
        str(meta.get("name")),
        f"{ready}/{total}",
        shown,
        str(restarts),
        age(meta.get("creationTimestamp"), now),
    ]
    if wide:
        row += [str(exit_code) if exit_code is not None else "-", str(status.get("podIP") or "-")]
    return row


def event_rows(events: list[dict[str, Any]], now: datetime | None = None) -> list[list[str]]:
    """LAST SEEN, TYPE, REASON, OBJECT (kind/name), MESSAGE for each Event, in the given order."""
    rows = []
    for ev in events:
        inv = obj_at(ev, "involvedObject")
        when = ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
        count = int(ev.get("count") or 1)
        seen = age(when or obj_at(ev, "metadata").get("creationTimestamp"), now)
        rows.append(
            [
                f"{seen} (x{count})" if count > 1 else seen,
                str(ev.get("type") or "Normal"),
                str(ev.get("reason") or ""),
                f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}",
                " ".join(str(ev.get("message") or "").split()),
            ]
        )
    return rows
