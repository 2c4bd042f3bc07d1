"""``kubetrain serve``: the local control plane in the foreground, as a Kubernetes API.

It runs what the background daemon runs (API server, controller, executor, status server) for
one ``KUBETRAIN_HOME``, in this terminal, until Ctrl-C; ``--api-only`` runs the API server alone,
for ``kubetrain controller`` to run against as it would in a cluster. Once everything answers it writes a
kubeconfig with the context ``kubetrain-local`` (``--kubeconfig PATH``, default
``$KUBETRAIN_HOME/kubeconfig``), so kubectl and the official Kubeflow SDK can use it unchanged.
Requests need the bearer token in that kubeconfig; the server listens on loopback only unless
``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubetrain.local.apiserver import ApiServer

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="where to write the kubeconfig (default: $KUBETRAIN_HOME/kubeconfig)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port to listen on (default: the last one, else a free one)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: loopback only)"
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="state directory (default: $KUBETRAIN_HOME or ~/.kubetrain)",
    )
    parser.add_argument(
        "--api-only",
        action="store_true",
        help="serve the API alone (no controller, executor or status server): a stand-in "
        "cluster for `kubetrain controller --kubeconfig`",
    )
    parser.add_argument(
        "--no-controller",
        action="store_true",
        help="serve the API and run pods (executor, Deployments, Services) without the built-in "
        "controller or its in-process admission: install it with `kubectl apply -k manifests/`",
    )
    parser.add_argument(
        "--audit-log-path",
        type=Path,
        default=None,
        help="append an audit.k8s.io/v1 Event (JSON lines) for every request RBAC decides: "
        "who asked for what, allowed or forbidden (the admin's system:masters requests are not "
        "decided by RBAC, so not logged)",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535; 0 picks a free one)")
    return port


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import sys

    from kubetrain.kube.eventloop import run as run_loop
    from kubetrain.local.daemon import daemon_status, default_home
    from kubetrain.local.daemon.main import ALREADY_RUNNING, run_daemon

    home: Path = args.home or default_home()
    status = daemon_status(home)
    if status.running:
        print(
            f"kubetrain serve: a daemon already serves {home} (pid {status.pid}) at {status.url};\n"
            f"  use its kubeconfig {status.kubeconfig}, or stop it first: kubetrain daemon stop",
            file=sys.stderr,
        )
        return 1

    def ready(server: ApiServer) -> None:
        path = server.write_kubeconfig(args.kubeconfig) if args.kubeconfig else home / "kubeconfig"
        what = (
            "API server (no controller, no executor)"
            if args.api_only
            else "API server and executor (no controller)"
            if args.no_controller
            else "control plane"
        )
        print(f"kubetrain {what} at {server.url} (home {home})", flush=True)
        print(f"kubeconfig: {path} (context kubetrain-local)", flush=True)
        print(f"try: kubectl --kubeconfig {path} get trainjobs,clustertrainingruntimes", flush=True)

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        daemon = run_daemon(
            home,
            port=args.port,
            host=args.host,
            on_ready=ready,
            api_only=args.api_only,
            controller=not args.no_controller,
            audit_log=args.audit_log_path,
        )
        # The API server alone runs on uvloop (compiled loop and TLS: less CPU per request),
        # with its store's objects kept out of the collector's way; pods are spawned with
        # options (umask) that only asyncio's own loop takes.
        code = run_loop(daemon, holds_objects=True) if args.api_only else asyncio.run(daemon)
    except OSError as exc:
        if exc.filename:
            print(f"kubetrain serve: {exc.filename}: {exc.strerror}", file=sys.stderr)
        else:
            print(
                f"kubetrain serve: cannot listen on {args.host}:{args.port}: {exc.strerror}",
                file=sys.stderr,
            )
        return 1
    except Exception as exc:
        from kubetrain.local.daemon.main import startup_problem

        problem = startup_problem(exc)
        if problem is None:
            raise
        print(f"kubetrain serve: {problem}", file=sys.stderr)
        return 1
    if code == ALREADY_RUNNING:
        return 1
    return code
