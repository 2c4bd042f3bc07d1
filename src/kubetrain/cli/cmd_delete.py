"""``kubetrain delete JOB... | -f FILE``: delete, then wait until every pod (process) is gone."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "names",
        nargs="*",
        metavar="JOB",
        help="TrainJob name(s), or `experiment NAME...` for hyperparameter searches",
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        metavar="PATH",
        help="delete the objects in these files",
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait until the job and all its pods are gone (default: wait)",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="how long to wait"
    )
    parser.add_argument(
        "--ignore-not-found", action="store_true", help="a missing object is not an error"
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.client.present import guarded, print_error

    if not args.names and not args.filename:
        print_error("name a TrainJob or pass -f FILE")
        return 2
    if args.names and args.filename:
        print_error("give TrainJob names or -f FILE, not both")
        return 2
    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import NotFoundError
    from kubetrain.client.files import read_objects
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.present import print_error

    objs = read_objects(args.filename) if args.filename else []
    code = 0
    with JobClient(connect_from_args(args)) as jc:
        kind, names = R.TRAINJOB, list(args.names)
        if len(names) > 1 and R.resolve_kind(names[0]) == (R.EXPERIMENT,):
            kind, names = R.EXPERIMENT, names[1:]
        targets = objs or [
            {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": n}}
            for n in names
        ]
        deleted_jobs: list[tuple[str, str | None]] = []
        # Reverse file order, as kubectl does: a file's TrainJob goes before the runtime it uses.
        for obj in reversed(targets) if objs else targets:
            name = obj["metadata"].get("name", "")
            trials: list[str] = []
            if (obj.get("apiVersion"), obj.get("kind")) == (
                R.EXPERIMENT.api_version,
                R.EXPERIMENT.kind,
            ):
                # Its trials' TrainJobs go with it (ownerReferences); wait for their processes.
                selector = {"katib.kubeflow.org/experiment": name}
                trials = [
                    t["metadata"]["name"]
                    for t in jc.objects(R.TRIAL, obj["metadata"].get("namespace"), selector)
                ]
            try:
                info = jc.delete_object(obj)
            except NotFoundError as exc:
                if not args.ignore_not_found:
                    print_error(str(exc))
                    code = 1
                continue
            if info == R.TRAINJOB:
                deleted_jobs.append((name, obj["metadata"].get("namespace")))
            deleted_jobs += [(t, obj["metadata"].get("namespace")) for t in trials]
            print(f'{info.qualified} "{name}" deleted', flush=True)
        if args.wait:
            for name, ns in deleted_jobs:
                jc.wait_deleted(name, namespace=ns, timeout=args.timeout)
    return code
