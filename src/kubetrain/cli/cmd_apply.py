"""``kubetrain apply -f FILE...``: create or update objects with server-side apply."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.legacy import add_convert_argument
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder or - (stdin); repeatable; YAML or JSON, many documents per file",
    )
    parser.add_argument(
        "--force-conflicts",
        action="store_true",
        help="take over fields another manager owns instead of failing",
    )
    parser.add_argument(
        "-o", "--output", choices=["name", "yaml", "json"], help="print the applied objects"
    )
    add_convert_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.client.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.legacy import convert_v1_objects
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.files import read_objects
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.present import dump

    objs = read_objects(args.filename)  # all files read before anything is sent
    conn = connect_from_args(args)
    try:
        objs = convert_v1_objects(
            objs, local=conn.local, allowed=args.convert, env_shim=args.env_shim
        )
    except BaseException:
        conn.close()
        raise
    with JobClient(conn) as jc:
        applied = []
        for obj in objs:
            result = jc.apply_one(obj, force=args.force_conflicts)
            applied.append(result.obj)
            if args.output == "name":
                print(f"{result.info.qualified}/{result.name}", flush=True)
            elif args.output is None:
                print(result, flush=True)
    if args.output in ("yaml", "json"):
        dump(
            applied[0]
            if len(applied) == 1
            else {"apiVersion": "v1", "kind": "List", "items": applied},
            args.output,
        )
    return 0
