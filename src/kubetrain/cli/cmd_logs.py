"""``kubetrain logs JOB``: a step's output (rank 0 by default); ``-f`` streams it."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument("name", metavar="JOB", help="TrainJob name")
    parser.add_argument(
        "--step",
        default="node",
        metavar="STEP",
        help="node (default) | launcher | dataset-initializer | model-initializer | node-N",
    )
    parser.add_argument(
        "--rank", type=int, metavar="N", help="node rank for --step node (default 0)"
    )
    parser.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")
    parser.add_argument("--tail", type=_lines, metavar="N", help="only the last N lines")
    parser.add_argument(
        "--all-ranks",
        action="store_true",
        help="every node's output, each line prefixed by its step",
    )
    add_connection_arguments(parser)


def _lines(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of lines") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: the number of lines must be 0 or more")
    return value


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded, print_error

    if args.all_ranks and (args.rank is not None or args.step != "node"):
        print_error("--all-ranks reads every node; drop --rank/--step")
        return 2
    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from collections.abc import Iterator

    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.logs import follow_step, merged, step_name

    with JobClient(connect_from_args(args)) as jc:
        view = jc.job(args.name)
        if args.all_ranks:
            names = [s.name for s in view.steps if s.name.startswith("node-")]
            if not names and not args.follow:
                raise ClientError(f'trainjob "{args.name}" has no node pods yet')
            if not names:  # following a job whose pods do not exist yet: expect numNodes of them
                names = [f"node-{i}" for i in range(view.num_nodes or 1)]
        else:
            names = [step_name(args.step, args.rank)]

        def lines_of(step: str) -> Iterator[str]:
            if args.follow:
                return follow_step(jc, args.name, step, tail=args.tail, across_restarts=False)
            found = jc.step(args.name, step)
            if found.phase == "Pending":
                raise ClientError(
                    f'step {step} of trainjob "{args.name}" has not started (pod {found.pod} is '
                    "Pending); use -f to wait for it"
                )
            return jc.logs(found.pod, found.container, tail=args.tail)

        if len(names) == 1:
            for line in lines_of(names[0]):
                print(line, flush=args.follow)
        else:
            width = max(len(n) for n in names)
            for step, line in merged({n: lines_of(n) for n in names}):
                print(f"[{step.ljust(width)}] {line}", flush=args.follow)
    return 0
