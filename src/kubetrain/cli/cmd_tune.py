"""``kubetrain tune -f experiment.yaml``: start a hyperparameter search and follow it.

The file holds a Katib ``Experiment`` (and optionally the runtime its trials use). The search
shows as a table of trials (parameters, state, objective) with the best so far, live on a
terminal and as one line per change in a pipe. Exit code 0 when the Experiment succeeds, 1 when
it fails (its reason printed), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kubetrain.api.access import list_at

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "-f", "--filename", action="append", required=True, metavar="PATH",
        help="file(s) holding one Experiment (kubeflow.org/v1beta1) and any runtime it needs",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=float, default=24 * 3600.0, metavar="SECONDS",
        help="give up following after this long (the search goes on)",
    )  # fmt: skip
    parser.add_argument(
        "--no-follow", dest="follow", action="store_false", help="apply and return at once"
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import print_error
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.files import read_objects
    from kubetrain.client.jobs import JobClient

    objs = read_objects(args.filename)
    experiments = [
        o for o in objs if (o.get("apiVersion"), o.get("kind")) == (R.EXPERIMENT.api_version, R.EXPERIMENT.kind)
    ]  # fmt: skip
    if len(experiments) != 1:
        print_error(
            f"{', '.join(args.filename)}: expected one Experiment (kubeflow.org/v1beta1), found {len(experiments)}"
        )
        return 2
    with JobClient(connect_from_args(args)) as jc:
        name = ""
        for obj in objs:
            result = jc.apply_one(obj)
            print(result, flush=True)
            if obj is experiments[0]:
                name = result.name
        if not args.follow:
            return 0
        return _follow(jc, name, args.timeout)


def _snapshot(jc: Any, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from kubetrain.client import resources as R

    experiment = jc.get(R.EXPERIMENT, name)
    trials = jc.objects(R.TRIAL, labels={"katib.kubeflow.org/experiment": name})
    trials.sort(key=lambda t: (t["metadata"].get("creationTimestamp") or "", t["metadata"]["name"]))
    return experiment, trials


def _follow(jc: Any, name: str, timeout: float) -> int:
    from kubetrain.cli.present import print_error, render_table
    from kubetrain.client.tuning import TRIAL_HEADERS, experiment_row, trial_rows

    live = _live(sys.stdout)
    seen: dict[str, tuple[str, ...]] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            experiment, trials = _snapshot(jc, name)
            row = experiment_row(experiment)
            state, best = row[1], row[7]
            rows = trial_rows(experiment, trials)
            if live is not None:
                from rich.text import Text

                heading = f"experiment {name}: {state}, {row[3]} trials, best {best}"
                live.update(Text(heading + "\n" + render_table(TRIAL_HEADERS, rows)))
            else:
                for r in rows:
                    key = r[0].rstrip(" *")
                    if seen.get(key) != tuple(r[1:]):
                        seen[key] = tuple(r[1:])
                        print("   ".join(r), flush=True)
            if state in ("Complete", "Failed"):
                break
            if time.monotonic() >= deadline:
                print_error(f"experiment {name} is still {state} after {timeout:g}s")
                return 1
            time.sleep(1.0)
    finally:
        if live is not None:
            live.stop()
    print(
        render_table(TRIAL_HEADERS, rows) if live is not None else "",
        end="\n" if live is not None else "",
    )
    conditions = list_at(experiment, "status", "conditions")
    last = conditions[-1] if conditions else {}
    print(f"experiment {name} {state}: {last.get('message', '')}; best {best}", flush=True)
    return 0 if state == "Complete" else 1


def _live(stream: Any) -> Any:
    if not stream.isatty():
        return None
    from rich.console import Console
    from rich.live import Live

    live = Live(console=Console(file=stream), transient=True, refresh_per_second=4)
    live.start()
    return live
