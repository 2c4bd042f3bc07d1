"""The local executor: plays JobSet controller, Job controller and kubelet on this machine.

``jobset_logic.reconcile`` is the pure decision (what a cluster would do next); the I/O loop
watches JobSets and Pods through the API server, applies those decisions and runs each pod as a
sandboxed process.
"""

from __future__ import annotations

__all__: list[str] = []
