"""``kubetrain daemon start|stop|status``: the local control plane of ``$KUBETRAIN_HOME``."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["start", "stop", "status"], help="what to do")
    parser.add_argument(
        "--home", metavar="DIR", help="the daemon's home (default: $KUBETRAIN_HOME or ~/.kubetrain)"
    )
    parser.add_argument(
        "--kill-pods",
        action="store_true",
        help="stop: end running pods too (default: they keep running and the next daemon adopts them)",
    )
    parser.add_argument("-o", "--output", choices=["yaml", "json"], help="print the status as data")


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _text(report: dict[str, Any]) -> str:
    rows = [
        ("Daemon", report["summary"]),
        ("Home", report["home"]),
        (
            "Kubeconfig",
            f"{report['kubeconfig']} (context {report['context']})" if report["kubeconfig"] else "",
        ),
        ("Log", report["log"]),
    ]
    return "\n".join(f"{k + ':':<12}{v}" for k, v in rows if v)


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import dump
    from kubetrain.client import daemon

    if args.action == "start":
        report = daemon.start(args.home)
    elif args.action == "stop":
        before = daemon.daemon_report(args.home)
        stopped = daemon.stop(args.home, kill_pods=args.kill_pods)
        report = daemon.daemon_report(args.home)
        if not args.output:
            what = "pods stopped too" if args.kill_pods else "pods keep running"
            print(
                f"stopped the kubetrain daemon (pid {before['pid']}; {what})"
                if stopped
                else "no kubetrain daemon was running"
            )
            return 0
    else:
        report = daemon.daemon_report(args.home)
    if args.output:
        dump(report, args.output)
    else:
        print(_text(report))
    # status: 1 when nothing answers, so scripts can test for a running daemon.
    return 0 if report["ready"] or args.action == "stop" else 1
