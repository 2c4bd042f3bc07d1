"""Framework callbacks: built lazily on the framework's own base class, reporting steps and metrics.

The real frameworks are multi-gigabyte installs and are not test dependencies: the callbacks'
behaviour is checked against small stand-in modules with the same base-class names, and the
tests against the real packages run only where they are installed.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kubetrain.progress import callbacks
from kubetrain.progress.reporter import ENV_URL, Reporter


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> int:
        self.bodies.append(body)
        return 200

    def last(self) -> dict[str, Any]:
        return dict(self.bodies[-1]["trainerStatus"])


@pytest.fixture
def recorder() -> tuple[Recorder, Reporter]:
    rec = Recorder()
    return rec, Reporter(interval_s=0.25, environ={ENV_URL: "x"}, sender=rec)


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget classes built by earlier tests, so each test builds against its own modules."""
    for name in ("TransformersProgressCallback", "LightningProgressCallback"):
        monkeypatch.delitem(callbacks.__dict__, name, raising=False)
    yield
    for name in ("TransformersProgressCallback", "LightningProgressCallback"):
        callbacks.__dict__.pop(name, None)


class Scalar:
    """A stand-in for a 0-d tensor."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_fake_transformers_trainer_reports_steps_and_logged_metrics(
    monkeypatch: pytest.MonkeyPatch, fresh: None, recorder: tuple[Recorder, Reporter]
) -> None:
    fake = types.ModuleType("transformers")
    fake.TrainerCallback = type("TrainerCallback", (), {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", fake)
    rec, reporter = recorder
    cb = callbacks.TransformersProgressCallback(reporter)
    assert isinstance(cb, fake.TrainerCallback)  # type: ignore[attr-defined]
    state = SimpleNamespace(global_step=0, max_steps=20)
    for step in range(1, 21):
        state.global_step = step
        cb.on_log(
            None,
            state,
            None,
            logs={"loss": 2.0 / step, "learning_rate": 1e-4, "epoch": 0.5, "note": "x"},
        )
        cb.on_step_end(None, state, None)
    cb.on_evaluate(None, state, None, metrics={"eval_loss": 0.3})
    cb.on_train_end(None, state, None)
    last = rec.last()
    assert last["progressPercentage"] == 100
    assert {m["name"]: m["value"] for m in last["metrics"]} == {
        "loss": "0.1",
        "learning_rate": "0.0001",
        "epoch": "0.5",
        "eval_loss": "0.3",
    }


def test_fake_lightning_trainer_reports_steps_and_callback_metrics(
    monkeypatch: pytest.MonkeyPatch, fresh: None, recorder: tuple[Recorder, Reporter]
) -> None:
    lightning = types.ModuleType("lightning")
    pytorch = types.ModuleType("lightning.pytorch")
    pytorch.Callback = type("Callback", (), {})  # type: ignore[attr-defined]
    lightning.pytorch = pytorch  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pytorch)
    rec, reporter = recorder
    cb = callbacks.LightningProgressCallback(reporter)
    trainer = SimpleNamespace(
        global_step=0, max_steps=-1, estimated_stepping_batches=8, callback_metrics={}
    )
    for step in range(1, 5):
        trainer.global_step = step
        trainer.callback_metrics = {"train_loss": Scalar(1.0 / step)}
        cb.on_train_batch_end(trainer, None, None, None, step - 1)
    reporter.flush(2)
    assert rec.last()["progressPercentage"] == 50
    trainer.global_step = 8
    cb.on_train_end(trainer, None)
    assert rec.last()["progressPercentage"] == 100
    assert rec.last()["metrics"] == [{"name": "train_loss", "value": "0.25"}]


def test_a_missing_framework_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    with pytest.raises(ImportError, match="pip install transformers"):
        callbacks.TransformersProgressCallback  # noqa: B018


def test_real_transformers_callback_is_a_trainer_callback(fresh: None) -> None:
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed (optional extra)"
    )
    assert issubclass(callbacks.TransformersProgressCallback, transformers.TrainerCallback)


def test_real_lightning_callback_is_a_lightning_callback(fresh: None) -> None:
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = pytest.importorskip(
            "pytorch_lightning", reason="lightning is not installed (optional extra)"
        )
    assert issubclass(callbacks.LightningProgressCallback, pl.Callback)
