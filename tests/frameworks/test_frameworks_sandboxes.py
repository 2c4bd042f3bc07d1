"""Every runnable framework runtime trains for real across pod sandboxes.

The pods are those the controller renders and the executor builds, each in its own
bubblewrap sandbox with the framework overlay applied (see frameworks_plane.py); the
assertions read the evidence of cross-process communication the example scripts print.
"""

from __future__ import annotations

import asyncio
import copy
import re
from pathlib import Path
from typing import Any

import pytest
from frameworks_plane import (
    EXAMPLES,
    HOST_PORT_29500,
    bwrap_usable,
    default_runtime,
    digests,
    example_job,
    run_trainjob,
)

from kubetrain.local.sandbox import PodSandbox

pytestmark = pytest.mark.skipif(
    not bwrap_usable(), reason="needs bubblewrap and /usr/sbin/sshd (openssh-server)"
)


@pytest.fixture
def mpi4py() -> None:
    pytest.importorskip("mpi4py", reason="the MPI tests' ranks use mpi4py")


def mpi_job(name: str, script: str, nodes: int, procs: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "deepspeed-distributed"},
            "trainer": {
                "numNodes": nodes,
                "numProcPerNode": procs,
                "command": ["mpirun", "python", "-c", script],
            },
        },
    }


async def test_mpi_example_runs_6_ranks_on_3_pods_over_real_sshd(
    tmp_path: Path, mpi4py: None
) -> None:
    out = await run_trainjob(example_job("mpi"), tmp_path, timeout=60)
    launcher = out.log("launcher")
    assert out.results["mpi-launcher-0-0"].succeeded, launcher
    assert "6 ranks on 3 pods: mpi-launcher-0-0, mpi-node-0-0, mpi-node-0-1" in launcher
    assert "allreduce(rank + 1) = 21 (expected 21)" in launcher
    assert "weights identical on all 6 ranks: True" in launcher
    loss = re.search(r"loss ([\d.]+) -> ([\d.]+)", launcher)
    assert loss is not None and float(loss.group(2)) < float(loss.group(1)) / 100
    assert out.elapsed < 30 and out.alive_after == []


async def test_mpi_without_run_launcher_as_node_puts_every_rank_on_the_node_pods(
    tmp_path: Path, mpi4py: None
) -> None:
    runtime = default_runtime("deepspeed-distributed")
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    script = (EXAMPLES / "mpi" / "train.py").read_text()
    out = await run_trainjob(mpi_job("mpi", script, 2, 2), tmp_path, runtime=runtime)
    launcher = out.log("launcher")
    assert out.results["mpi-launcher-0-0"].succeeded, launcher
    assert "4 ranks on 2 pods: mpi-node-0-0, mpi-node-0-1" in launcher
    assert "weights identical on all 4 ranks: True" in launcher


@pytest.mark.parametrize(
    ("name", "evidence"),
    [
        pytest.param("jax", [r"allgather\(rank \+ 1\) = \[1, 2\]", r"\(2 devices in all\)"],
                     id="jax: jax.distributed.initialize across two pods"),
        pytest.param("xgboost", [r"trained on 4000 of 8000 rows \(allreduce\)"],
                     id="xgboost: Rabit tracker on rank 0, two workers",
                     marks=HOST_PORT_29500),
        pytest.param("mlx", [r"all_sum\(rank \+ 1\) = 3 \(expected 3\)"],
                     id="mlx: MPI backend through the mlx-distributed runtime"),
    ],
)  # fmt: skip
async def test_example_trains_across_two_pods(
    tmp_path: Path, name: str, evidence: list[str]
) -> None:
    pytest.importorskip({"jax": "jax", "xgboost": "xgboost", "mlx": "mlx.core"}[name])
    out = await run_trainjob(example_job(name), tmp_path, timeout=60)
    text = "".join(out.logs.values())
    assert all(r.succeeded for r in out.results.values()), text
    for pattern in evidence:
        assert re.search(pattern, text), (pattern, text)
    # Every rank printed its model's digest, and all agree: they trained one model together.
    assert len(re.findall(r"digest [0-9a-f]{16}", text)) == 2 and len(digests(text)) == 1
    if name in ("xgboost", "mlx"):
        acc = re.search(r"accuracy ([\d.]+) vs majority baseline ([\d.]+)", text)
        assert acc is not None and float(acc.group(1)) > float(acc.group(2)) + 0.1
    assert out.alive_after == []


# -- failures end the job quickly and leave nothing behind ---------------------------------

_DIES_ON_A_NODE = """
import os, socket, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
comm.allreduce(1)
if socket.gethostname().startswith("fail-node-0-0") and comm.Get_rank() % 2 == 1:
    os._exit(3)
time.sleep(2)
comm.allreduce(1)
time.sleep(120)
"""


async def test_a_rank_dying_on_a_node_fails_the_launcher_within_30_s(
    tmp_path: Path, mpi4py: None
) -> None:
    out = await run_trainjob(mpi_job("fail", _DIES_ON_A_NODE, 2, 2), tmp_path, timeout=60)
    result = out.results["fail-launcher-0-0"]
    assert result.containers["node"] != 0 and not result.terminated
    assert out.failed_first == "fail-launcher-0-0"
    assert out.elapsed < 30
    assert out.alive_after == []


async def test_a_node_pod_killed_mid_run_fails_the_launcher_within_30_s(
    tmp_path: Path, mpi4py: None
) -> None:
    script = "import time\nfrom mpi4py import MPI\nMPI.COMM_WORLD.allreduce(1)\ntime.sleep(120)\n"
    killed_at: list[float] = []

    async def kill_node(sandboxes: dict[str, PodSandbox]) -> None:
        await asyncio.sleep(4)  # ranks are up and blocked in sleep by then
        killed_at.append(asyncio.get_running_loop().time())
        await sandboxes["kill-node-0-0"].terminate(0)

    start = asyncio.get_running_loop().time()
    out = await run_trainjob(
        mpi_job("kill", script, 2, 1), tmp_path, timeout=60, during=kill_node,
        stop_on_failure=False,
    )  # fmt: skip
    result = out.results["kill-launcher-0-0"]
    # The launcher ended by itself (mpirun saw its node go), not by our terminate.
    assert result.containers["node"] != 0 and not result.terminated, out.log("launcher")
    assert killed_at and start + out.elapsed - killed_at[0] < 30
    assert out.alive_after == []


async def test_the_overlay_leaves_the_rendered_job_unchanged(tmp_path: Path) -> None:
    # Guard: run_trainjob must not edit the caller's TrainJob (examples are loaded once).
    job = example_job("mpi")
    before = copy.deepcopy(job)
    from frameworks_plane import plan_objects

    plan_objects(job)
    assert job == before
