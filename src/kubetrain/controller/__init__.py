"""kubetrain.controller: the TrainJob controller, one program for a cluster and the local daemon.

In-process use (the local daemon)::

    stop = asyncio.Event()
    await run_controller(kubeconfig, namespace=None, gates=FeatureGates(),
                         environment=Environment(...), concurrency=5, stop_event=stop)

``kubeconfig`` is a path, a kubeconfig document (``ApiServer.kubeconfig()``), a lightkube
``KubeConfig``/``SingleConfig``, or None for the environment. To keep hold of the object
(metrics, readiness, leader election, a custom rate limit)::

    controller = Controller(connect(kubeconfig), namespace=None, concurrency=5)
    task = asyncio.create_task(controller.run(stop))
    await controller.ready.wait()

Everything else in this package is internal: ``trainjob`` (the reconciler and its divergences
from upstream), ``events``, ``leader``, ``deploy`` (the cluster install). The REST client,
informer and work queue are :mod:`kubetrain.kube`'s, shared with the local engine.
"""

from __future__ import annotations

from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.manager import Controller, LeadershipLost, run_controller
from kubetrain.kube.client import ApiError, KubeClient, connect

__all__ = [
    "ApiError",
    "Controller",
    "KubeClient",
    "LeaderElector",
    "LeadershipLost",
    "connect",
    "run_controller",
]
