"""Printing for people and scripts: kubectl-like tables (coloured on a terminal, plain aligned
text in pipes and tests), YAML/JSON dumps, the progress bar, and the one error boundary every
command uses: a :class:`ClientError` or a load error becomes ``error: <line>`` on stderr and exit
code 1, never a traceback. The rows themselves come from :mod:`kubetrain.client.present`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from kubetrain.api.access import list_at

__all__ = [
    "STATE_STYLES",
    "dump",
    "guarded",
    "metrics_text",
    "print_error",
    "print_table",
    "progress_bar",
    "render_table",
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


def progress_bar(percent: int, width: int = 20) -> str:
    """``███████░░░░░░░░░░░░░`` for a percentage (clamped to 0..100)."""
    filled = round(max(0, min(100, percent)) * width / 100)
    return "\u2588" * filled + "\u2591" * (width - filled)


def metrics_text(progress: dict[str, Any], limit: int = 3) -> str:
    """``loss=0.41 lr=0.001`` from ``status.trainerStatus`` (the first ``limit`` metrics)."""
    metrics = list_at(progress, "metrics")
    return " ".join(f"{m.get('name')}={m.get('value')}" for m in metrics[:limit])


def dump(value: dict[str, Any], fmt: str, stream: TextIO | None = None) -> None:
    """``yaml`` or ``json`` text of one object (or ``v1 List``), as ``kubectl -o yaml|json``."""
    from kubetrain.api.dump import dump_json, dump_yaml

    out = stream or sys.stdout
    out.write(dump_json(value) if fmt == "json" else dump_yaml(value))
    out.flush()
