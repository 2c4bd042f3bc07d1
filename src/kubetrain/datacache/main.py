"""``python -m kubetrain.datacache [head|worker] HOST PORT``: one cache process.

The role is the first argument, or else the LWS pod's place in its group
(``LWS_WORKER_INDEX``: 0 is the leader, so the head). The head finds its workers in
``CACHE_WORKERS`` (``host:port,...``) or, as upstream's does, from ``LWS_LEADER_ADDRESS`` and
``LWS_GROUP_SIZE``; it gives them ``CONNECT_TIMEOUT_SECS`` (default 60) to answer. A table
that cannot be read or a worker that never answers ends the head with exit code 1 and one line
saying why, so the LeaderWorkerSet restarts the group.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from .protocol import HEALTH_PORT, ProtocolError, worker_addresses
from .table import TableError, source_from_env

__all__ = ["main", "workers_from_env"]

log = logging.getLogger("kubetrain.datacache")


def workers_from_env(env: Mapping[str, str]) -> list[str]:
    """The workers' ``grpc://host:port`` locations for the head."""
    listed = [w.strip() for w in env.get("CACHE_WORKERS", "").split(",") if w.strip()]
    if not listed:
        leader, size = env.get("LWS_LEADER_ADDRESS", ""), env.get("LWS_GROUP_SIZE", "")
        if not leader or not size.isdigit():
            raise ProtocolError(
                "no workers: set CACHE_WORKERS, or run in a LeaderWorkerSet "
                "(LWS_LEADER_ADDRESS, LWS_GROUP_SIZE)"
            )
        listed = worker_addresses(leader, int(size))
    return [w if "://" in w else f"grpc://{w}" for w in listed]


def _role(arg: str | None, env: Mapping[str, str]) -> str:
    if arg:
        return arg
    index = env.get("LWS_WORKER_INDEX")
    if index is None:
        raise ProtocolError("say head or worker (or run in a LeaderWorkerSet: LWS_WORKER_INDEX)")
    return "head" if index == "0" else "worker"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubetrain.datacache",
        description="A data cache head or worker (upstream's protocol, Arrow Flight).",
    )
    parser.add_argument("role", nargs="?", choices=["head", "worker"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO, stream=sys.stdout
    )
    env = os.environ
    try:
        role = _role(args.role, env)
        source = source_from_env(env)
        health_port = int(env.get("HEALTH_PORT") or HEALTH_PORT)
        location = f"grpc://{args.host}:{args.port}"
        # Imported here: pyarrow.flight takes a while, and --help should not wait for it.
        from .server import HeadServer, WorkerServer, serve_health

        if role == "worker":
            worker = WorkerServer(location, source)
            serve_health(health_port, worker.ready)
            log.info("cache worker for %s on %s", source.name, location)
            worker.serve()
            return 0
        head = HeadServer(location, source, workers_from_env(env))
        serve_health(health_port, head.ready)
        log.info("cache head for %s on %s", source.name, location)
        head.load(float(env.get("CONNECT_TIMEOUT_SECS") or 60))
        head.watch()
        log.info("cache ready")
        head.serve()
        return 0
    except (ProtocolError, TableError, ValueError, OSError) as err:
        log.error("data cache failed: %s", err)
        return 1
