"""``kubetrain dashboard``: every TrainJob, its progress, curves and logs, in a browser.

Serves on loopback at a free port and prints the URL with a token (like Jupyter); talks to the
local daemon by default, to a cluster with ``--kubeconfig``/``--context``. Read-only unless
``--allow-actions``.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "--address",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1; anything else is reachable by others)",
    )
    parser.add_argument(
        "--port", type=int, default=0, metavar="N", help="port (default: a free one)"
    )
    parser.add_argument("--open", action="store_true", help="open the URL in a browser")
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="offer suspend, resume and delete (each confirmed; done with your credentials)",
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.jobs import JobClient

    try:
        from kubetrain.dashboard.app import DashboardConfig, serve
    except ImportError as exc:  # aiohttp is a core dependency; a broken install says which
        raise ClientError(f"the dashboard cannot load: {exc}") from None
    if not 0 <= args.port <= 65535:
        raise ClientError(f"--port {args.port}: must be between 0 and 65535")
    if args.address not in _LOOPBACK:
        print(
            f"warning: listening on {args.address}: anyone who can reach it and has the token "
            "sees your jobs" + (" and can act on them" if args.allow_actions else ""),
            file=sys.stderr,
        )
    config = DashboardConfig(args.address, args.port, args.allow_actions)
    with JobClient(connect_from_args(args)) as jc:

        def ready(url: str) -> None:
            mode = "actions allowed" if args.allow_actions else "read-only"
            print(f"kubetrain dashboard ({mode}) for {jc.conn.server} ({jc.conn.context})")
            print(f"    {url}", flush=True)
            if args.open:
                import webbrowser

                webbrowser.open(url)

        serve(jc, config, ready)
    return 0
