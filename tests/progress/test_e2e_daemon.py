"""End to end on the local daemon: training code in a pod sandbox → status server → ``kubetrain get``.

The pod reaches the status server the way it would on a cluster: the injected
``KUBEFLOW_TRAINER_SERVER_URL`` names the manager Service, its /etc/hosts maps that name to the
daemon, the CA and a pod-bound token come from the projected ``kubeflow-trainer-token`` volume.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import TRAINING_RUNTIME, TRAINJOB
from kubetrain.local.daemon import ensure_daemon, stop_daemon
from kubetrain.testing import make_runtime, make_trainjob

REPO = Path(__file__).resolve().parents[2]

REPORTING = """
import math, time
from kubetrain import progress
total = 30
for step in range(1, total + 1):
    time.sleep(0.05)
    progress.report(step=step, total_steps=total, metrics={"loss": round(math.exp(-step / 10), 4)})
print("done", flush=True)
"""

OFFICIAL_SDK = """
from kubeflow.trainer import update_trainjob_status
ok = update_trainjob_status(progress_percent=100, estimated_remaining_seconds=0, metrics={"loss": 0.125})
print("sdk", ok, flush=True)
raise SystemExit(0 if ok else 3)
"""


@pytest.fixture(
    params=["default", "plain"], ids=["sandbox as the machine allows", "plain fallback"]
)
def home(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    # The plain fallback has no /etc/hosts of its own: the Service name in the URL is
    # rewritten to the daemon's address, which the serving certificate also names.
    if request.param == "plain":
        monkeypatch.setenv("KUBETRAIN_SANDBOX", "plain")
    path = tmp_path / "home"
    try:
        yield path
    finally:
        stop_daemon(path, kill_pods=True, timeout=10)


# A plain runtime (no framework, no declared ports): these jobs never queue behind other torch
# jobs on this machine for port 29500. TrainJobStatus applies to every runtime alike.
RUNTIME = (
    make_runtime("plain", kind="TrainingRuntime")
    .num_nodes(1)
    .job("node", ancestor="trainer", image="python")
    .obj()
)


def trainjob(name: str, code: str, **env: str) -> dict[str, Any]:
    return (
        make_trainjob(name)
        .runtime("plain", kind="TrainingRuntime", api_group="trainer.kubeflow.org")
        .trainer(num_nodes=1, command=["python", "-c", code], env=env)
        .obj()
    )


async def finished(api: KubeClient, name: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
        conds = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
            return obj
        await asyncio.sleep(0.2)
    raise TimeoutError(name)


# `kubetrain metrics` through its own module while the command table does not list it yet.
_METRICS = (
    "import argparse, sys; from kubetrain.cli import cmd_metrics;"
    "p = argparse.ArgumentParser(); cmd_metrics.add_arguments(p);"
    "sys.exit(cmd_metrics.run(p.parse_args(sys.argv[2:])))"
)


def kubetrain(home: Path, *args: str) -> str:
    from kubetrain.cli.main import COMMANDS

    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    command = ["-m", "kubetrain.cli.main"]
    if args[0] not in COMMANDS and args[0] == "metrics":
        command = ["-c", _METRICS]
    out = subprocess.run(
        [sys.executable, *command, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def log_of(home: Path, job: str) -> str:
    logs = sorted((home / "logs" / "default").glob(f"{job}-*/node.log"))
    return "\n".join(p.read_text() for p in logs)


def _conditions(obj: dict[str, Any]) -> list[str]:
    return [c["type"] for c in obj["status"]["conditions"] if c["status"] == "True"]


async def test_a_training_pod_reports_progress_that_kubetrain_get_and_metrics_show(
    home: Path,
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        await api.create(TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, RUNTIME)
        await api.create(
            TRAINJOB.api_version,
            TRAINJOB.plural,
            trainjob("reporting", REPORTING, KUBETRAIN_PROGRESS_INTERVAL="0.3"),
        )
        done = await finished(api, "reporting")
        assert _conditions(done) == ["Complete"], log_of(home, "reporting")
    finally:
        await api.close()
    got = json.loads(kubetrain(home, "get", "trainjob", "reporting", "-o", "json"))
    status = got["status"]["trainerStatus"]
    assert status["progressPercentage"] == 100, log_of(home, "reporting")
    assert status["metrics"] == [{"name": "loss", "value": "0.0498"}]
    assert status["lastUpdatedTime"]
    csv_text = kubetrain(home, "metrics", "reporting", "-o", "csv")
    lines = csv_text.strip().splitlines()
    assert lines[0] == "lastUpdatedTime,progressPercentage,estimatedRemainingSeconds,loss"
    assert len(lines) >= 3, csv_text  # header + at least two reports
    assert lines[-1].split(",")[1] == "100"
    chart = home / "curves.png"
    kubetrain(home, "metrics", "reporting", "--plot", str(chart))
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_the_official_sdk_helper_works_from_inside_a_local_trainjob(home: Path) -> None:
    pytest.importorskip("kubeflow.trainer", reason="the official kubeflow SDK is a test dependency")
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        await api.create(TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, RUNTIME)
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob("sdk", OFFICIAL_SDK))
        done = await finished(api, "sdk")
        assert _conditions(done) == ["Complete"], log_of(home, "sdk")
        status = done["status"]["trainerStatus"]
    finally:
        await api.close()
    assert status["progressPercentage"] == 100
    assert status["metrics"] == [{"name": "loss", "value": "0.125"}]
