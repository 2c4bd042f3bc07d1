"""``kubetrain suspend JOB...``: pause TrainJobs (their pods stop; ``resume`` starts them again)."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("names", nargs="+", metavar="JOB", help="TrainJob name(s)")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.client.present import guarded

    return guarded(lambda: set_suspend(args, True))


def set_suspend(args: argparse.Namespace, suspend: bool) -> int:
    """Shared with ``resume``: patch every named job, one line per job, 1 if any failed."""
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.present import print_error
    from kubetrain.client.resources import TRAINJOB

    verb = "suspended" if suspend else "resumed"
    code = 0
    with JobClient(connect_from_args(args)) as jc:
        for name in args.names:
            try:
                changed = jc.set_suspend(name, suspend)
            except ClientError as exc:
                print_error(str(exc))
                code = 1
                continue
            note = (
                "" if changed else f" (unchanged: already {'suspended' if suspend else 'running'})"
            )
            print(f"{TRAINJOB.qualified}/{name} {verb}{note}", flush=True)
    return code
