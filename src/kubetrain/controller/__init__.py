"""kubetrain.controller: the TrainJob controller, one program for a cluster and the local daemon.

In-process use (the local daemon)::

    stop = asyncio.Event()
    await run_controller(kubeconfig_path, gates=FeatureGates(), stop_event=stop)

or, to keep hold of the object (metrics, readiness)::

    controller = Controller(connect(kubeconfig_path), namespace=None, concurrency=5)
    task = asyncio.create_task(controller.run(stop))
    await controller.ready.wait()
"""

from __future__ import annotations

from kubetrain.controller.kube import ApiError, KubeClient, connect
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.manager import Controller, LeadershipLost, run_controller

__all__ = [
    "ApiError",
    "Controller",
    "KubeClient",
    "LeaderElector",
    "LeadershipLost",
    "connect",
    "run_controller",
]
