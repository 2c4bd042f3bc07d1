"""End to end on the embedded control plane: the examples as TrainJobs through the daemon
(API server + controller + executor), real pods, real training, TrainJob status.

JAX and XGBoost need nothing from the engine beyond its pods; the MPI runtimes rely on the
framework hooks the engine calls (the sandbox's `pod_overlay`, the executor's
`local_refusal`, the daemon's image map through `with_framework_images`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from frameworks_plane import HOST_PORT_29500, bwrap_usable, default_runtime, digests, example_job

from kubetrain.kube.client import connect
from kubetrain.kube.kinds import POD, TRAINING_RUNTIME, TRAINJOB
from kubetrain.local.daemon import ensure_daemon

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bwrap_usable(), reason="needs bubblewrap and openssh-server"),
]


def example(name: str) -> dict[str, Any]:
    data = example_job(name)
    data["metadata"]["namespace"] = "default"
    return data


def no_retries(trainjob: dict[str, Any]) -> dict[str, Any]:
    """A namespaced copy of the TrainJob's default runtime whose Jobs never retry a pod; the
    TrainJob is pointed at it.

    The default runtimes leave ``backoffLimit`` at the Job default (6): a crashing rank is
    retried (on a cluster for about ten minutes of back-off) before the TrainJob fails. These
    tests are about what happens once a pod has failed for good.
    """
    runtime = default_runtime(trainjob["spec"]["runtimeRef"]["name"])
    runtime["kind"] = "TrainingRuntime"
    labels = runtime["metadata"].get("labels", {})
    runtime["metadata"] = {"name": "no-retries", "namespace": "default", "labels": labels}
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["backoffLimit"] = 0
    trainjob["spec"]["runtimeRef"] = {"name": "no-retries", "kind": "TrainingRuntime"}
    return runtime


async def run(
    home: Path,
    trainjob: dict[str, Any],
    timeout: float = 90,
    runtime: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str, float]:
    """Submit (with ``runtime`` first, if any), wait for Complete or Failed;
    (TrainJob, all pod logs, seconds from submission)."""
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    name = trainjob["metadata"]["name"]
    try:
        if runtime is not None:
            await api.create(TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, runtime)
        start = time.monotonic()
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        while True:
            obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
            conds = (obj.get("status") or {}).get("conditions") or []
            if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
                break
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{name} did not finish: {conds}")
            await asyncio.sleep(0.2)
        elapsed = time.monotonic() - start
        logs = "".join(_read(p) for p in sorted((home / "logs" / "default").rglob("*.log")))
        return obj, logs, elapsed
    finally:
        await api.close()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:  # a deleted pod's log may go while we read
        return ""


def condition(obj: dict[str, Any]) -> dict[str, Any]:
    conds = obj["status"]["conditions"]
    found: dict[str, Any] = next(
        c for c in conds if c["type"] in ("Complete", "Failed") and c["status"] == "True"
    )
    return found


@pytest.mark.parametrize("name", ["jax", pytest.param("xgboost", marks=HOST_PORT_29500)])
async def test_the_example_completes_and_all_ranks_hold_one_model(home: Path, name: str) -> None:
    pytest.importorskip(name)
    obj, logs, _ = await run(home, example(name))
    assert condition(obj)["type"] == "Complete", logs
    assert logs.count("digest ") == 2 and len(digests(logs)) == 1, logs


@pytest.mark.parametrize("name", ["jax", "xgboost"])
async def test_a_crashing_worker_fails_the_trainjob_within_30_s(home: Path, name: str) -> None:
    job = example(name)
    # Rank 1 dies before it joins; rank 0 would wait for it for minutes on its own.
    rank_env = {"jax": "JAX_PROCESS_ID", "xgboost": "DMLC_TASK_ID"}[name]
    job["spec"]["trainer"]["command"] = [
        "python", "-c",
        f"import os, sys, time\nif os.environ['{rank_env}'] == '1':\n    sys.exit(3)\n"
        "time.sleep(300)\n",
    ]  # fmt: skip
    runtime = no_retries(job)
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        await api.create(TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, runtime)
        submitted = time.monotonic()
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, job)
        # Timed from the first running pod (or submission, if none was seen running): in a loaded suite a pod may first wait for port
        # 29500, held by another test's job (the local engine's shared port space).
        started: float | None = None
        deadline = time.monotonic() + 90
        while True:
            assert time.monotonic() < deadline, "the TrainJob did not fail within 90 s"
            obj = await api.get(TRAINJOB.api_version, TRAINJOB.plural, name, namespace="default")
            conds = (obj.get("status") or {}).get("conditions") or []
            if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
                break
            if started is None:
                pods, _ = await api.list(
                    POD.api_version,
                    POD.plural,
                    label_selector=f"jobset.sigs.k8s.io/jobset-name={name}",
                )
                if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
                    started = time.monotonic()
            await asyncio.sleep(0.2)
        finished = time.monotonic()
    finally:
        await api.close()
    failed = condition(obj)
    assert failed["type"] == "Failed" and failed["reason"], failed
    assert finished - (started or submitted) < 30
    await _no_live_pods(home, name)


async def _no_live_pods(home: Path, name: str) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        deadline = time.monotonic() + 10
        while True:
            items, _ = await api.list(
                POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
            )
            if all((p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in items):
                return
            assert time.monotonic() < deadline, [p["status"].get("phase") for p in items]
            await asyncio.sleep(0.2)
    finally:
        await api.close()


async def test_the_mpi_example_completes_over_real_sshd(home: Path) -> None:
    pytest.importorskip("mpi4py", reason="the MPI ranks use mpi4py")
    obj, logs, _ = await run(home, example("mpi"))
    assert condition(obj)["type"] == "Complete", logs
    assert "allreduce(rank + 1) = 21 (expected 21)" in logs
    assert "weights identical on all 6 ranks: True" in logs


async def test_an_mpi_rank_that_dies_fails_the_trainjob_within_30_s(home: Path) -> None:
    pytest.importorskip("mpi4py", reason="the MPI ranks use mpi4py")
    job = example("mpi")
    job["spec"]["trainer"]["command"] = [
        "mpirun", "python", "-c",
        "import os, time\nfrom mpi4py import MPI\nMPI.COMM_WORLD.allreduce(1)\n"
        "if MPI.COMM_WORLD.Get_rank() == 1:\n    os._exit(3)\ntime.sleep(300)\n",
    ]  # fmt: skip
    obj, _, elapsed = await run(home, job, runtime=no_retries(job))
    failed = condition(obj)
    assert failed["type"] == "Failed" and failed["reason"], failed
    assert elapsed < 30
    await _no_live_pods(home, "mpi")
