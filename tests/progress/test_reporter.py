"""The in-pod reporter: no-op outside a TrainJob, never raises, newest state always goes out."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import kubetrain.progress
from kubetrain.progress.reporter import (
    ENV_URL,
    MAX_METRICS,
    Reporter,
    format_metrics,
)

INSIDE = {ENV_URL: "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443/x"}


class Recorder:
    """A sender that keeps every body (and can be told to fail)."""

    def __init__(self, code: int = 200, delay: float = 0.0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.code = code
        self.delay = delay
        self.sent = threading.Event()

    def __call__(self, body: dict[str, Any]) -> int:
        time.sleep(self.delay)
        self.bodies.append(body)
        self.sent.set()
        return self.code

    def status(self, i: int = -1) -> dict[str, Any]:
        return dict(self.bodies[i]["trainerStatus"])


def reporter(recorder: Recorder, interval_s: float = 0.3, **env: str) -> Reporter:
    return Reporter(interval_s=interval_s, environ={**INSIDE, **env}, sender=recorder)


def test_outside_a_trainjob_report_does_nothing() -> None:
    r = Reporter(environ={})
    assert r.enabled is False
    assert r.report(step=1, total_steps=10, metrics={"loss": 1.0}) is False
    assert r._thread is None


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        pytest.param({}, True, id="no rank variable: a single process reports"),
        pytest.param({"RANK": "0"}, True, id="torchrun rank 0"),
        pytest.param({"RANK": "3"}, False, id="torchrun rank 3 stays quiet"),
        pytest.param({"OMPI_COMM_WORLD_RANK": "1"}, False, id="Open MPI rank 1 stays quiet"),
        pytest.param({"PMI_RANK": "0"}, True, id="MPICH rank 0"),
    ],
)
def test_only_global_rank_zero_reports(env: dict[str, str], enabled: bool) -> None:
    assert reporter(Recorder(), **env).enabled is enabled


def test_the_module_function_is_a_no_op_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_URL, raising=False)
    monkeypatch.setattr(kubetrain.progress.reporter, "_default", None)
    assert kubetrain.progress.report(step=1, total_steps=2) is False
    assert kubetrain.progress.flush() is True


def test_percent_eta_and_metrics_on_the_wire() -> None:
    rec = Recorder()
    r = reporter(rec)
    r.report(step=0, total_steps=100)  # anchors the rate
    time.sleep(0.2)  # 20 ms a step: 90 steps to go take about 1.8 s
    assert r.report(
        step=10, total_steps=100, metrics={"loss": 0.123456789, "phase": "warm", "ok": True}
    )
    assert r.flush(2.0)
    status = rec.status()
    assert status["progressPercentage"] == 10
    assert 1 <= status["estimatedRemainingSeconds"] <= 4
    assert status["metrics"] == [
        {"name": "loss", "value": "0.123457"},
        {"name": "phase", "value": "warm"},
        {"name": "ok", "value": "true"},
    ]
    assert status["lastUpdatedTime"].endswith("Z")


def test_throttled_calls_are_delayed_not_dropped() -> None:
    """A loop reporting every step sends about one update per interval, the newest each time."""
    rec = Recorder()
    r = reporter(rec, interval_s=0.2)
    for step in range(1, 50):
        r.report(step=step, total_steps=100, metrics={"step": step})
        time.sleep(0.01)
    assert r.flush(2.0)
    steps = [int(b["trainerStatus"]["metrics"][0]["value"]) for b in rec.bodies]
    assert steps[0] == 1
    assert steps[-1] == 49  # the newest state went out even though it was throttled
    assert 2 <= len(steps) <= 6, steps


def test_the_final_step_goes_out_at_once() -> None:
    rec = Recorder()
    r = reporter(rec, interval_s=60)
    r.report(step=1, total_steps=3)
    rec.sent.wait(2)
    rec.sent.clear()
    r.report(step=3, total_steps=3, metrics={"loss": 0.1})
    assert rec.sent.wait(2), "the final step waited for the interval"
    assert rec.status()["progressPercentage"] == 100
    assert rec.status()["estimatedRemainingSeconds"] == 0


def test_report_returns_at_once_while_the_server_is_slow() -> None:
    rec = Recorder(delay=1.0)
    r = reporter(rec, interval_s=0.25)
    t0 = time.perf_counter()
    for step in range(200):
        r.report(step=step, total_steps=200, force=True)
    # Waiting on the server even once would take its whole 1 s delay.
    assert time.perf_counter() - t0 < 0.5


class Explodes:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_nothing_raises_into_training() -> None:
    def broken_sender(body: dict[str, Any]) -> int:
        raise ConnectionError("down")

    r = Reporter(interval_s=0.25, environ=INSIDE, sender=broken_sender)
    assert r.report(step=1, total_steps=2, metrics={"odd": Explodes(), "nan": float("nan")}) in (
        True,
        False,
    )
    assert r.report(step=2, total_steps=2, metrics={"x": 1}) is True
    r.flush(1.0)
    assert r._thread is not None and r._thread.is_alive()
    # Garbage arguments are swallowed too.
    assert r.report(step="three", total_steps=object()) in (True, False)  # type: ignore[arg-type]


def test_unreachable_server_and_missing_token_file_count_as_failures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = Reporter(
        interval_s=0.25,
        environ={
            ENV_URL: "https://127.0.0.1:1/apis/x",
            "KUBEFLOW_TRAINER_SERVER_TOKEN": "/nonexistent",
        },
    )
    r.report(step=1, total_steps=1)
    r.flush(3.0)
    assert r.sent == 0 and r.failed >= 1
    assert capsys.readouterr().err.count("kubetrain.progress") == 1


def test_metrics_are_cut_to_the_crd_limits() -> None:
    metrics = {f"m{i}": i for i in range(300)}
    metrics = {"": 1, "n" * 80: "v" * 80, "empty": "", **metrics}
    out = format_metrics(metrics)
    assert len(out) == MAX_METRICS
    assert out[0] == {"name": "n" * 64, "value": "v" * 64}
    assert all(m["name"] and m["value"] for m in out)


def test_zero_dimensional_tensors_are_read_as_numbers() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed")
    loss = torch.tensor(0.5, requires_grad=True) * 2
    assert format_metrics({"loss": loss}) == [{"name": "loss", "value": "1"}]


def test_forked_children_get_their_own_sender() -> None:
    """A DataLoader worker (fork) that reports must not wait on its parent's dead thread."""
    code = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "src")!r})
from kubetrain.progress.reporter import Reporter
sent = []
r = Reporter(interval_s=0.25, environ={{"KUBEFLOW_TRAINER_SERVER_URL": "x"}}, sender=lambda b: sent.append(b) or 200)
r.report(step=1, total_steps=4)
r.flush(2)
pid = os.fork()
if pid == 0:
    r.report(step=2, total_steps=4, force=True)
    os._exit(0 if r.flush(2) and len(sent) == 2 else 1)
_, status = os.waitpid(pid, 0)
print("child ok" if status == 0 else "child stuck")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "child ok" in out.stdout, out.stdout + out.stderr


def test_importing_progress_pulls_in_no_framework_or_server_code() -> None:
    code = (
        "import sys, kubetrain.progress;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('aiohttp', 'yaml', 'lightkube', 'torch', 'transformers', 'lightning', 'kubetrain.api')"
        " or m in ('kubetrain.api', 'kubetrain.runtime', 'kubetrain.progress.callbacks')];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
