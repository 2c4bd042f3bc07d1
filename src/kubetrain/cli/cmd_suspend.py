"""``kubetrain suspend [trainjob] NAME... | trainjob/NAME... | --all | -f FILE``: pause TrainJobs
(their pods stop; ``resume`` starts them again)."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.targets import add_target_arguments
    from kubetrain.client.connection import add_connection_arguments

    add_target_arguments(parser, parser.prog.rsplit(" ", 1)[-1])
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: set_suspend(args, True))


def set_suspend(args: argparse.Namespace, suspend: bool) -> int:
    """Shared with ``resume``: patch every named job, one line per job, 1 if any failed."""
    from kubetrain.cli.present import print_error
    from kubetrain.cli.targets import TargetError, parse_targets
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.resources import TRAINJOB

    try:
        targets = parse_targets(args, allowed=(TRAINJOB,))
    except TargetError as err:
        print_error(str(err))
        return 2
    verb = "suspended" if suspend else "resumed"
    code = 0
    with JobClient(connect_from_args(args)) as jc:
        for doc in targets.documents(jc):
            name = str(doc["metadata"]["name"])
            try:
                changed = jc.set_suspend(name, suspend, namespace=doc["metadata"].get("namespace"))
            except ClientError as exc:
                print_error(str(exc))
                code = 1
                continue
            note = (
                "" if changed else f" (unchanged: already {'suspended' if suspend else 'running'})"
            )
            print(f"{TRAINJOB.qualified}/{name} {verb}{note}", flush=True)
    return code
