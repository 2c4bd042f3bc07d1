"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) on the local engine: its CRD (`lws_crd`),
its defaulting webhook's rules (`LwsDefaulter`, which the daemon's API server admits LWS objects
with), its rules (`logic`) and its controller (`LwsController`), which the daemon runs beside
the executor. The data cache's head and workers are the first users.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from .admission import LwsDefaulter
from .controller import LwsController
from .crd import lws_crd

__all__ = ["LwsController", "LwsDefaulter", "lws_crd", "run_lws"]


async def run_lws(kubeconfig: Path, stop: asyncio.Event) -> None:
    """Run the LeaderWorkerSet controller against the API server of ``kubeconfig``."""
    from kubetrain.controller import connect

    client = connect(kubeconfig)
    try:
        await LwsController(client).run(stop)
    finally:
        await client.close()
