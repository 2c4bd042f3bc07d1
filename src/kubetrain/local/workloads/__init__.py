"""The local engine's workload controllers: what kube-controller-manager does for the core kinds.

One module per controller, each a pure decision (tested with tables) and a thin reconcile over
`kubetrain.kube` (`loop`): Deployments (`deployment`), ReplicaSets and ReplicationControllers
(`replicaset`), StatefulSets (`statefulset`), DaemonSets (`daemonset`), batch/v1 Jobs (`job`,
on the executor's Job rules), Endpoints and EndpointSlices of Services (`endpoints`). They write
owner references; the embedded API server's garbage collector removes dependents.

    await run_workloads(kubeconfig, stop)   # until ``stop`` is set
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import REPLICA_SET, REPLICATION_CONTROLLER

from .daemonset import DaemonSetController
from .deployment import DeploymentController
from .endpoints import EndpointsController
from .job import JobController
from .loop import Controller, Workloads
from .replicaset import ReplicaSetController
from .statefulset import StatefulSetController

__all__ = ["Controller", "Workloads", "build_workloads", "run_workloads"]


def build_workloads(client: KubeClient) -> Workloads:
    """Every workload controller of the local engine, over one client."""
    shared = Workloads(client)
    shared.add(ReplicaSetController(shared, REPLICA_SET))
    shared.add(ReplicaSetController(shared, REPLICATION_CONTROLLER))
    shared.add(DeploymentController(shared))
    shared.add(EndpointsController(shared))
    shared.add(JobController(shared))
    shared.add(StatefulSetController(shared))
    shared.add(DaemonSetController(shared))
    return shared


async def run_workloads(
    kubeconfig: Path, stop: asyncio.Event, ready: asyncio.Event | None = None
) -> None:
    """Run the workload controllers against the API server of ``kubeconfig`` until ``stop``."""
    client = connect(kubeconfig)
    try:
        await build_workloads(client).run(stop, ready)
    finally:
        await client.close()
