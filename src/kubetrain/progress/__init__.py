"""Report training progress and metrics from inside a TrainJob.

``report()`` is the whole API for training code::

    from kubetrain import progress
    for step in range(total):
        ...
        progress.report(step=step + 1, total_steps=total, metrics={"loss": loss})

It speaks upstream's TrainJobStatus wire protocol (the three ``KUBEFLOW_TRAINER_SERVER_*``
variables the controller injects), so the same code works on kubetrain's local engine and on a
cluster running upstream Trainer with the feature gate on. Outside a TrainJob it does nothing.
Framework callbacks (HuggingFace Transformers, PyTorch Lightning) are in
``kubetrain.progress.callbacks``, imported only when asked for.

This package must stay importable in any training image: standard library only.
"""

from __future__ import annotations

from kubetrain.progress.reporter import Reporter, flush, report

__all__ = ["Reporter", "flush", "report"]
