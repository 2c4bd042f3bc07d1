"""``kubetrain get KIND [NAME]``: list TrainJobs, runtimes or pods; ``-w`` watches."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import obj_at

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.resources import KindInfo

__all__ = ["add_arguments", "run"]

KINDS_HELP = (
    "trainjobs | runtimes | trainingruntimes | clustertrainingruntimes | pods | "
    "experiments | trials (comma-separated for several)"
)

Listing = list[tuple["KindInfo", list[dict[str, Any]]]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("kind", metavar="KIND", help=KINDS_HELP)
    parser.add_argument("name", nargs="?", metavar="NAME", help="one object by name")
    parser.add_argument(
        "-o",
        "--output",
        choices=["wide", "yaml", "json", "name"],
        help="output format (default: a table)",
    )
    parser.add_argument(
        "-w", "--watch", action="store_true", help="after listing, print every change"
    )
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list across all namespaces"
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import print_error
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.jobs import ALL_NAMESPACES, JobClient

    kinds: list[KindInfo] = []
    for word in args.kind.split(","):
        found = R.resolve_kind(word)
        if not found:
            print_error(f'unknown resource type "{word}"; use one of: {KINDS_HELP}')
            return 2
        kinds.extend(k for k in found if k not in kinds)
    with JobClient(connect_from_args(args)) as jc:
        ns = ALL_NAMESPACES if args.all_namespaces and not args.name else None
        listing: Listing = []
        versions: list[str | None] = []  # where each kind's watch continues from
        for info in kinds:
            if args.name and len(kinds) == 1:
                objs = [jc.get(info, args.name)]  # NotFound names the object, exit 1
                version = objs[0]["metadata"].get("resourceVersion")
            elif args.name:
                found_obj = jc.find(info, args.name)
                objs = [found_obj] if found_obj else []
                version = found_obj["metadata"].get("resourceVersion") if found_obj else None
            else:
                objs, version = jc.objects_at(info, ns)
            listing.append((info, objs))
            versions.append(version)
        if args.name and not any(objs for _, objs in listing):
            print_error(f'no {args.kind} named "{args.name}" in namespace {jc.namespace}')
            return 1
        widths = _print(jc, listing, args, header=True)
        if args.watch:
            # One stream: for ``runtimes`` the cluster-wide kind, which is where runtimes live.
            for _type, obj in jc.watch(kinds[0], ns, args.name, versions[0]):
                widths = _print(jc, [(kinds[0], [obj])], args, header=False, at_least=widths)
    return 0


def _print(
    jc: JobClient,
    listing: Listing,
    args: argparse.Namespace,
    *,
    header: bool,
    at_least: list[int] | None = None,
) -> list[int]:
    """Print a listing (``header``) or a watch event's rows; returns the table's column widths."""
    import sys

    from kubetrain.cli.present import dump, print_table

    everything = [o for _, objs in listing for o in objs]
    if args.output in ("yaml", "json"):
        if not header:  # a watch event: one document per change
            for obj in everything:
                dump(obj, args.output)
                print("---" if args.output == "yaml" else "", flush=True)
        elif args.name and len(everything) == 1:
            dump(everything[0], args.output)
        else:
            items = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}}
            dump({**items, "items": everything}, args.output)
        return at_least or []
    if args.output == "name":
        for info, objs in listing:
            for obj in objs:
                print(f"{info.qualified}/{obj['metadata']['name']}", flush=True)
        return at_least or []
    if not everything:
        if header:
            where = "any namespace" if args.all_namespaces else f"{jc.namespace} namespace"
            print(f"No resources found in {where}.", file=sys.stderr)
        return at_least or []
    headers, rows = _table(jc, listing, args)
    return print_table(headers, rows, header=header, at_least=at_least or ())


def _table(
    jc: JobClient, listing: Listing, args: argparse.Namespace
) -> tuple[list[str], list[list[str]]]:
    from kubetrain.client import resources as R
    from kubetrain.client.present import pod_row, runtime_row, trainjob_headers, trainjob_row

    wide = args.output == "wide"
    all_ns = bool(args.all_namespaces)
    infos = [info for info, objs in listing if objs]
    everything = [o for _, objs in listing for o in objs]
    if infos[0] == R.TRAINJOB:
        views = jc.jobs_from(everything)
        headers = trainjob_headers(wide=wide, all_namespaces=all_ns)
        return headers, [trainjob_row(v, wide=wide, all_namespaces=all_ns) for v in views]
    if infos[0] in (R.EXPERIMENT, R.TRIAL, R.SUGGESTION):
        headers, rows = _tuning_table(jc, infos[0], everything)
    elif infos[0] == R.POD:
        headers = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        headers += ["EXIT CODE", "IP"] if wide else []
        rows = [pod_row(p, wide=wide) for p in everything]
    else:
        show_kind = len(infos) > 1 or args.kind in ("runtime", "runtimes")
        headers = ["NAME", *(["KIND"] if show_kind else []), "FRAMEWORK", "NODES", "AGE"]
        rows = [runtime_row(o, show_kind=show_kind) for o in everything]
    if all_ns:
        headers = ["NAMESPACE", *headers]
        rows = [
            [o["metadata"].get("namespace") or "-", *r]
            for o, r in zip(everything, rows, strict=True)
        ]
    return headers, rows


def _tuning_table(
    jc: JobClient, info: KindInfo, objs: list[dict[str, Any]]
) -> tuple[list[str], list[list[str]]]:
    from kubetrain.client import resources as R
    from kubetrain.client.tuning import (
        EXPERIMENT_HEADERS,
        TRIAL_HEADERS,
        experiment_row,
        trial_rows,
    )

    if info == R.EXPERIMENT:
        return EXPERIMENT_HEADERS, [experiment_row(o) for o in objs]
    if info == R.TRIAL:
        return ["EXPERIMENT", *TRIAL_HEADERS], [
            [str(obj_at(o, "metadata", "labels").get("katib.kubeflow.org/experiment", "")), *row]
            for o, row in zip(objs, trial_rows(None, objs), strict=True)
        ]
    rows = [
        [o["metadata"]["name"], str(obj_at(o, "spec").get("requests", "")),
         str(obj_at(o, "status").get("suggestionCount", 0))]
        for o in objs
    ]  # fmt: skip
    return ["NAME", "REQUESTED", "ASSIGNED"], rows
