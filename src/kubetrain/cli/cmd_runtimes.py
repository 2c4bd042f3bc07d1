"""``kubetrain runtimes [NAME] [-o yaml|json]``: the default ClusterTrainingRuntimes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubetrain.api.access import dicts, obj_at

__all__ = ["add_arguments", "run", "summary"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME", help="print one runtime")
    parser.add_argument(
        "-o", "--output", choices=["yaml", "json"], help="output format (default: a table)"
    )


def summary(rt: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """(name, framework, policy, nodes, trainer image) of one runtime."""
    meta = obj_at(rt, "metadata")
    spec = obj_at(rt, "spec")
    ml = obj_at(spec, "mlPolicy")
    policy = next((k for k in ("torch", "mpi", "jax", "xgboost", "flux") if k in ml), "-")
    image = "-"
    for job in dicts(obj_at(spec, "template", "spec").get("replicatedJobs")):
        labels = obj_at(job, "template", "metadata", "labels")
        if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") != "trainer":
            continue
        pod = obj_at(job, "template", "spec", "template", "spec")
        for c in dicts(pod.get("containers")):
            if c.get("name") == "node":
                image = str(c.get("image", "-"))
        break
    return (
        str(meta.get("name", "")),
        str(obj_at(meta, "labels").get("trainer.kubeflow.org/framework", "-")),
        policy,
        str(ml.get("numNodes", 1)),
        image,
    )


def run(args: argparse.Namespace) -> int:
    from kubetrain.api.dump import dump_json, dump_yaml
    from kubetrain.runtime.defaults import default_runtimes

    runtimes = default_runtimes()
    if args.name is not None:
        chosen = [r for r in runtimes if obj_at(r, "metadata").get("name") == args.name]
        if not chosen:
            names = ", ".join(sorted(str(obj_at(r, "metadata").get("name")) for r in runtimes))
            print(f"runtime {args.name!r} not found; default runtimes: {names}", file=sys.stderr)
            return 1
        runtimes = chosen
    if args.output == "json":
        sys.stdout.write(dump_json(runtimes[0] if args.name else runtimes))
        return 0
    if args.output == "yaml" or args.name is not None:
        sys.stdout.write(dump_yaml(runtimes[0] if args.name else runtimes))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("NAME", "FRAMEWORK", "POLICY", "NODES", "IMAGE"):
        table.add_column(column)
    for rt in runtimes:
        table.add_row(*summary(rt))
    # Piped output gets full image names instead of a table cut to 80 columns.
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    return 0
