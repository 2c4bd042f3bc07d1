"""``kubetrain migrate -f FILE|DIR|-``: Training Operator v1 jobs as TrainJobs (+ runtimes).

The converted YAML goes to stdout, the report to stderr (``--report json`` for machines).
All documents are converted before anything is printed: a refusal prints only errors, exit 1.
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder or - (stdin) holding v1 jobs; repeatable",
    )
    parser.add_argument(
        "--env-shim",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="set v1's env contract (MASTER_ADDR, WORLD_SIZE, RANK, TF_CONFIG, ...) in the output"
        " (default); --no-env-shim reports it instead",
    )
    parser.add_argument(
        "--report", choices=["text", "json"], default="text", help="report format on stderr"
    )
    parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")


def run(args: argparse.Namespace) -> int:
    from kubetrain.api.dump import dump_json, dump_yaml
    from kubetrain.api.errors import LoadError
    from kubetrain.cli.legacy import convert_documents, print_migrate_error, print_report
    from kubetrain.cli.present import print_error
    from kubetrain.client.files import read_documents
    from kubetrain.migrate import MigrateError

    try:
        conversions = convert_documents(read_documents(args.filename), env_shim=args.env_shim)
    except LoadError as exc:
        for line in str(exc).splitlines():
            print_error(line)
        return 1
    except MigrateError as exc:
        print_migrate_error(exc)
        return 1
    objects = [o for c in conversions for o in c.objects]
    print(dump_yaml(objects) if args.output == "yaml" else dump_json(objects), end="")
    print_report(conversions, args.report)
    return 0
