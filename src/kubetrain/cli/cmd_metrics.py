"""``kubetrain metrics JOB``: the series of progress reports a TrainJob's training code sent.

The local engine keeps every accepted report (``kubetrain.local.history``); this prints them as
a table, CSV or JSON, or draws the curves with ``--plot out.png``. Against a cluster only the
latest report exists (in ``status.trainerStatus``), so that one point is shown, with a note.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kubetrain.client.metrics import metric_names

if TYPE_CHECKING:
    from kubetrain.local.history import Point

__all__ = ["add_arguments", "metric_names", "plot_png", "rows", "run"]

PLOT_EXTRA = "pip install 'kubetrain[plot]'"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("name", metavar="JOB", help="TrainJob name")
    parser.add_argument(
        "-o", "--output", choices=["table", "csv", "json"], default="table", help="output format"
    )
    parser.add_argument(
        "--plot", metavar="PNG", type=Path, help="draw the metrics (one panel each) into this file"
    )
    parser.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="only these metrics (repeatable; default: all)",
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def rows(points: Sequence[Point], names: Sequence[str]) -> list[list[str]]:
    """One row per report: time as sent, progress, ETA seconds, then each metric ('' if absent)."""
    return [
        [
            p.updated,
            "" if p.progress is None else str(p.progress),
            "" if p.eta is None else str(p.eta),
            *(p.metrics.get(n, "") for n in names),
        ]
        for p in points
    ]


def _run(args: argparse.Namespace) -> int:
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.metrics import metric_series

    with JobClient(connect_from_args(args)) as jc:
        series = metric_series(jc, args.name)
    namespace, uid, points = series.namespace, series.uid, series.points
    if series.latest_only and not series.local:
        print(
            "note: a cluster keeps only the latest report (status.trainerStatus)", file=sys.stderr
        )
    names = metric_names(points, args.metric)
    if args.plot is not None:
        plot_png(points, names, args.plot, title=f"trainjob/{args.name}")
        print(f"wrote {args.plot}", file=sys.stderr)
        return 0
    if not points:
        print(f'No progress reports for trainjob "{args.name}" yet.', file=sys.stderr)
        return 0
    if args.output == "json":
        body = {
            "name": args.name,
            "namespace": namespace,
            "uid": uid,
            "points": [p.as_dict() for p in points],
        }
        print(json.dumps(body, indent=2))
    elif args.output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(
            ["lastUpdatedTime", "progressPercentage", "estimatedRemainingSeconds", *names]
        )
        writer.writerows(rows(points, names))
    else:
        from kubetrain.cli.present import print_table
        from kubetrain.client.present import eta

        table = [
            [_clock(r[0]), f"{r[1]}%" if r[1] else "-", eta(int(r[2])) if r[2] else "-", *r[3:]]
            for r in rows(points, names)
        ]
        print_table(["TIME", "PROGRESS", "ETA", *(n.upper() for n in names)], table)
    return 0


def _clock(stamp: str) -> str:
    # Local wall-clock time of day: the series is read by a person next to its own clock.
    try:
        return (
            datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone().strftime("%H:%M:%S")
        )
    except ValueError:
        return stamp


def plot_png(points: Sequence[Point], names: Sequence[str], path: Path, *, title: str) -> None:
    """One panel per numeric metric (and progress) against minutes since the first report,
    drawn with matplotlib (the ``plot`` extra)."""
    from kubetrain.client.errors import ClientError
    from kubetrain.local.history import as_number

    if not points:
        raise ClientError("nothing to plot: no progress reports yet")
    start = points[0].received
    minutes = [(p.received - start) / 60 for p in points]
    panels: list[tuple[str, list[float], list[float]]] = []
    for name in names:
        xs, ys = [], []
        for x, p in zip(minutes, points, strict=True):
            value = as_number(p.metrics.get(name, ""))
            if value is not None:
                xs.append(x)
                ys.append(value)
        if ys:
            panels.append((name, xs, ys))
    progress = [
        (x, float(p.progress))
        for x, p in zip(minutes, points, strict=True)
        if p.progress is not None
    ]
    if progress:
        panels.append(("progress %", [x for x, _ in progress], [y for _, y in progress]))
    if not panels:
        raise ClientError("nothing to plot: no numeric metrics reported")
    try:
        import matplotlib
    except ImportError:
        raise ClientError(
            f"--plot draws with matplotlib, which is not installed: {PLOT_EXTRA}"
        ) from None
    matplotlib.use("Agg")  # files only; never open a window
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(panels), 1, sharex=True, figsize=(8, 2.2 * len(panels) + 0.6), squeeze=False
    )
    for ax, (name, xs, ys) in zip(axes[:, 0], panels, strict=True):
        ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
        if "loss" in name and min(ys) > 0 and max(ys) / min(ys) > 100:
            ax.set_yscale("log")  # losses spanning decades read better on a log scale
    axes[-1, 0].set_xlabel("minutes since the first report")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
