"""Progress callbacks for HuggingFace Transformers and PyTorch Lightning (optional extras).

::

    from kubetrain.progress.callbacks import TransformersProgressCallback
    trainer = Trainer(..., callbacks=[TransformersProgressCallback()])

    from kubetrain.progress.callbacks import LightningProgressCallback
    trainer = lightning.Trainer(..., callbacks=[LightningProgressCallback()])

Each class is built the first time it is asked for, subclassing the framework's own callback
base, so importing this module (or ``kubetrain.progress``) never imports a framework. Asking for
one whose framework is missing raises ImportError with the line that installs it.

Both report the global step against the planned number of steps, and the newest numeric
metrics the framework logged (loss, learning rate, evaluation results), through the same
`report` that training code calls directly.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.progress.reporter import Reporter, default_reporter

# The two callback classes exist only once built by __getattr__ (below), hence the noqa.
__all__ = ["LightningProgressCallback", "ProgressTracker", "TransformersProgressCallback"]  # noqa: F822


class ProgressTracker:
    """What both callbacks do, free of any framework: remember metrics, report steps."""

    def __init__(self, reporter: Reporter | None = None) -> None:
        self._reporter = reporter
        self.metrics: dict[str, Any] = {}

    @property
    def reporter(self) -> Reporter:
        return self._reporter if self._reporter is not None else default_reporter()

    def remember(self, values: Mapping[str, Any] | None) -> None:
        """Keep the numeric entries of ``values`` (newest wins); text and nested values are skipped."""
        for name, value in (values or {}).items():
            plain = value
            item = getattr(value, "item", None)
            if callable(item):
                try:
                    plain = item()
                except Exception:
                    continue
            if isinstance(plain, int | float) and not isinstance(plain, bool):
                self.metrics[str(name)] = plain

    def step(self, step: int, total_steps: int | None, *, force: bool = False) -> None:
        total = total_steps if total_steps and total_steps > 0 else None
        self.reporter.report(
            step=step, total_steps=total, metrics=dict(self.metrics) or None, force=force
        )

    def end(self, step: int, total_steps: int | None) -> None:
        self.step(step, total_steps, force=True)
        self.reporter.flush()


_HINTS = {
    "TransformersProgressCallback": "pip install transformers",
    "LightningProgressCallback": "pip install lightning",
}


def _import_first(*names: str) -> Any:
    last: ImportError | None = None
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as err:
            last = err
    assert last is not None
    raise last


def _transformers_callback() -> type:
    transformers = importlib.import_module("transformers")

    class TransformersProgressCallback(transformers.TrainerCallback):  # type: ignore[misc,name-defined]  # built at run time
        """Reports ``state.global_step`` of ``state.max_steps`` and the newest logged metrics."""

        def __init__(self, reporter: Reporter | None = None) -> None:
            self.tracker = ProgressTracker(reporter)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            self.tracker.remember(logs)

        def on_evaluate(
            self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any
        ) -> None:
            self.tracker.remember(metrics)

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.tracker.step(int(state.global_step), int(state.max_steps or 0))

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.tracker.end(int(state.global_step), int(state.max_steps or 0))

    return TransformersProgressCallback


def _lightning_callback() -> type:
    # Lightning 2.x ships as ``lightning``; the older standalone package is ``pytorch_lightning``.
    base = _import_first("lightning.pytorch", "pytorch_lightning").Callback

    def total_steps(trainer: Any) -> int:
        if int(getattr(trainer, "max_steps", -1) or -1) > 0:
            return int(trainer.max_steps)
        try:
            return int(trainer.estimated_stepping_batches)
        except Exception:  # unknown length (an iterable dataset without max_steps)
            return 0

    class LightningProgressCallback(base):  # type: ignore[misc,valid-type]  # built at run time
        """Reports ``trainer.global_step`` and the newest ``trainer.callback_metrics``."""

        def __init__(self, reporter: Reporter | None = None) -> None:
            super().__init__()
            self.tracker = ProgressTracker(reporter)

        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any, **kw: Any) -> None:
            self.tracker.remember(getattr(trainer, "callback_metrics", None))
            self.tracker.step(int(trainer.global_step), total_steps(trainer))

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            self.tracker.remember(getattr(trainer, "callback_metrics", None))

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.tracker.remember(getattr(trainer, "callback_metrics", None))
            self.tracker.end(int(trainer.global_step), total_steps(trainer))

    return LightningProgressCallback


_FACTORIES: dict[str, Callable[[], type]] = {
    "TransformersProgressCallback": _transformers_callback,
    "LightningProgressCallback": _lightning_callback,
}


def __getattr__(name: str) -> type:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        cls = factory()
    except ImportError as err:
        raise ImportError(f"{name} needs its framework: {_HINTS[name]}") from err
    globals()[name] = cls  # built once; later lookups find it without __getattr__
    return cls
