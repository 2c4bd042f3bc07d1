"""The local executor: plays JobSet controller, Job controller and kubelet on this machine.

``jobset_logic.reconcile`` is the pure decision (what a cluster would do next); `Executor`
watches JobSets and Pods through the API server, applies those decisions and runs each pod as a
sandboxed process, talking to the API server through :mod:`kubetrain.kube`::

    client = kubetrain.kube.client.connect(home / "kubeconfig")
    executor = Executor(client, ExecutorSettings(home=home))
    await executor.start()        # caches filled, leftover pods adopted or recorded
    ...
    await executor.stop()         # pods keep running for the next daemon (kill_pods=True ends them)
"""

from __future__ import annotations

from .decision import Decision, Settings
from .jobset_logic import reconcile
from .loop import Executor
from .podrunner import RunnerSettings
from .settings import ExecutorSettings, TokenProvider

__all__ = [
    "Decision",
    "Executor",
    "ExecutorSettings",
    "RunnerSettings",
    "Settings",
    "TokenProvider",
    "reconcile",
]
