"""Presenting client results: kubectl-like tables for people, YAML/JSON/names for scripts.

Rows are built as plain strings first, so the same table prints through rich on a terminal (state
coloured, aligned) and as plain aligned text in pipes and tests. Also home of the one error
boundary every command uses: a :class:`ClientError` or a load error becomes ``error: <line>`` on
stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TextIO

from kubetrain.api.access import dicts, list_at, obj_at
from kubetrain.client.steps import pod_summary
from kubetrain.client.view import JobView, age

__all__ = [
    "STATE_STYLES",
    "dump",
    "eta",
    "guarded",
    "key_metric",
    "metrics_text",
    "pod_row",
    "print_error",
    "print_table",
    "progress_bar",
    "render_table",
    "runtime_row",
    "trainjob_headers",
    "trainjob_row",
]

STATE_STYLES = {
    "Complete": "green",
    "Failed": "bold red",
    "Running": "cyan",
    "Suspended": "yellow",
    "Created": "dim",
}


def print_error(message: str, stream: TextIO | None = None) -> None:
    print(f"error: {message}", file=stream or sys.stderr)


def guarded(body: Callable[[], int]) -> int:
    """Run a command body; known failures print one line and give exit code 1."""
    from kubetrain.api.errors import LoadError
    from kubetrain.client.errors import ClientError

    try:
        return body()
    except ClientError as exc:
        print_error(str(exc))
        return 1
    except LoadError as exc:
        for line in str(exc).splitlines():
            print_error(line)
        return 1


def _widths(
    headers: Sequence[str], rows: Sequence[Sequence[str]], at_least: Sequence[int] = ()
) -> list[int]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return [max(w, m) for w, m in zip(widths, [*at_least, *[0] * len(widths)], strict=False)]


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], at_least: Sequence[int] = ()
) -> str:
    """Columns padded to their widest cell with three spaces between, like kubectl."""
    widths = _widths(headers, rows, at_least)
    lines = []
    for cells in (headers, *rows):
        lines.append("   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    return "\n".join(lines)


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    header: bool = True,
    stream: TextIO | None = None,
    at_least: Sequence[int] = (),
) -> list[int]:
    """Print a table; on a terminal the header is bold and the STATE/STATUS cell coloured.

    Returns the column widths used; pass them back as ``at_least`` to keep later rows (a watch)
    aligned under the same header.
    """
    out = stream or sys.stdout
    widths = _widths(headers, rows, at_least)
    lines = render_table(headers, rows, widths).splitlines()
    if not out.isatty():
        print("\n".join(lines if header else lines[1:]), file=out, flush=True)
        return widths
    from rich.console import Console
    from rich.text import Text

    console = Console(file=out, highlight=False, soft_wrap=True)
    if header:
        console.print(Text(lines[0], style="bold"))
    col = next((i for i, h in enumerate(headers) if h in ("STATE", "STATUS")), None)
    for line, cells in zip(lines[1:], rows, strict=True):
        text = Text(line)
        if col is not None:
            start = sum(widths[:col]) + 3 * col
            text.stylize(STATE_STYLES.get(cells[col], ""), start, start + len(cells[col]))
        console.print(text)
    return widths


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


def progress_bar(percent: int, width: int = 20) -> str:
    """``███████░░░░░░░░░░░░░`` for a percentage (clamped to 0..100)."""
    filled = round(max(0, min(100, percent)) * width / 100)
    return "\u2588" * filled + "\u2591" * (width - filled)


def metrics_text(progress: dict[str, Any], limit: int = 3) -> str:
    """``loss=0.41 lr=0.001`` from ``status.trainerStatus`` (the first ``limit`` metrics)."""
    metrics = list_at(progress, "metrics")
    return " ".join(f"{m.get('name')}={m.get('value')}" for m in metrics[:limit])


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


def dump(value: dict[str, Any], fmt: str, stream: TextIO | None = None) -> None:
    """``yaml`` or ``json`` text of one object (or ``v1 List``), as ``kubectl -o yaml|json``."""
    from kubetrain.api.dump import dump_json, dump_yaml

    out = stream or sys.stdout
    out.write(dump_json(value) if fmt == "json" else dump_yaml(value))
    out.flush()


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
