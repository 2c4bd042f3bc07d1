"""``kubetrain delete [KIND] NAME... | KIND/NAME... | --all | -f FILE``: delete, then wait
until every pod (process) is gone (arguments as kubectl reads them, see `targets`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubetrain.cli.targets import Targets

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.targets import add_target_arguments
    from kubetrain.client.connection import add_connection_arguments

    add_target_arguments(parser, "delete")
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
    from kubetrain.cli.present import guarded, print_error
    from kubetrain.cli.targets import TargetError, parse_targets

    def checked() -> int:
        try:
            targets = parse_targets(args)
        except TargetError as err:
            print_error(str(err))
            return 2
        return _run(args, targets)

    return guarded(checked)


def _run(args: argparse.Namespace, targets: Targets) -> int:
    from kubetrain.cli.present import print_error
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import NotFoundError
    from kubetrain.client.jobs import JobClient

    code = 0
    with JobClient(connect_from_args(args)) as jc:
        docs = targets.documents(jc)
        deleted_jobs: list[tuple[str, str | None]] = []
        # Reverse file order, as kubectl does: a file's TrainJob goes before the runtime it uses.
        for obj in reversed(docs) if targets.objects else docs:
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
