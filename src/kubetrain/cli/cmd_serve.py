"""``kubetrain serve``: run the local control plane in the foreground.

At this stage that is the embedded API server alone. Once it answers, a kubeconfig with the
context ``kubetrain-local`` is written (default ``$KUBETRAIN_HOME/kubeconfig``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="where to write the kubeconfig (default: $KUBETRAIN_HOME/kubeconfig)",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: a free one)"
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


def run(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    import sys

    from kubetrain.api.schema import crd_manifests
    from kubetrain.local.apiserver import ApiServer
    from kubetrain.runtime.defaults import default_runtimes

    async def main() -> int:
        server = ApiServer(
            args.home,
            host=args.host,
            port=args.port,
            crds=crd_manifests(),
            seed_objects=default_runtimes,
        )
        try:
            await server.start()
        except OSError as exc:
            print(
                f"kubetrain serve: cannot listen on {args.host}:{args.port}: {exc.strerror}",
                file=sys.stderr,
            )
            return 1
        path = server.write_kubeconfig(args.kubeconfig)
        print(f"kubetrain API server at {server.url}", flush=True)
        print(f"kubeconfig: {path} (context kubetrain-local)", flush=True)
        print(f"try: kubectl --kubeconfig {path} get trainjobs", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.close()
        return 0

    return asyncio.run(main())
