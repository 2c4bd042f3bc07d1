"""``python -m kubetrain.local.daemon --home DIR``: the daemon process itself (see `main`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from kubetrain.local.apiserver import default_home

from .main import run_daemon, startup_problem

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubetrain.local.daemon")
    parser.add_argument(
        "--home", type=Path, default=None, help="KUBETRAIN_HOME (default: ~/.kubetrain)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    home = (args.home or default_home()).expanduser().resolve()
    try:
        return asyncio.run(run_daemon(home))
    except Exception as err:
        problem = startup_problem(err)
        if problem is None:
            raise
        # The client shows this line (the last of daemon.log) as the reason.
        print(f"kubetrain daemon: {problem}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter finalisation: garbage-collecting the asyncio subprocess
    # transports of pods that must outlive this daemon would kill their processes.
    os._exit(code)
