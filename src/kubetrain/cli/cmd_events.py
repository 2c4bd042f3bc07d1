"""``kubetrain events JOB``: Events of a TrainJob, its JobSet, its Jobs and its pods."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("name", metavar="JOB", help="TrainJob name")
    parser.add_argument("-o", "--output", choices=["yaml", "json"], help="print the Event objects")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    import sys

    from kubetrain.cli.present import dump, print_table
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.present import event_rows

    with JobClient(connect_from_args(args)) as jc:
        jc.get(R.TRAINJOB, args.name)  # a missing job is an error, not an empty list
        events = jc.events(args.name)
    if args.output:
        dump({"apiVersion": "v1", "kind": "List", "items": events}, args.output)
        return 0
    if not events:
        print(f'No events for trainjob "{args.name}".', file=sys.stderr)
        return 0
    print_table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], event_rows(events))
    return 0
