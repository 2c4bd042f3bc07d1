"""The key end-to-end: two pods, torchrun with only the torch runtime's PET_* env, one group."""

from __future__ import annotations

import asyncio
import re
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import make_ctx, make_pod, needs_bwrap

from kubetrain.local.sandbox import PodResult, PodSandbox, jobset_hosts, loopback_address

TJ = "tj"
INDEX = "batch.kubernetes.io/job-completion-index"

ALLREDUCE = textwrap.dedent("""
    import socket
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    print(f"rank={rank} world={dist.get_world_size()} host={socket.gethostname()} sum={value.item():.0f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
""")


def _master_port() -> int:
    """A free port instead of the runtime's 29500.

    Pods share the host's network namespace and torch's rendezvous store listens on all
    addresses, so a store on 29500 from any other job on this machine (other test runs, a
    user's job) would take our ranks' connections and hang them; that happened while other
    sessions ran torch jobs here. The port is the one value that is not the runtime's.
    """
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


MASTER_PORT = _master_port()


def torch_pod(index: int, command: list[str], volumes: list[dict[str, Any]], mounts: list[dict[str, Any]],
              env: list[dict[str, Any]] | None = None, nproc: int = 2) -> dict[str, Any]:  # fmt: skip
    """A pod as JobSet + the torch plugin make it for TrainJob ``tj`` with numNodes 2."""
    pet = [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX}']"}}},
        {"name": "PET_MASTER_ADDR", "value": f"{TJ}-node-0-0.{TJ}"},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]  # fmt: skip
    return make_pod(
        f"{TJ}-node-0-{index}-abc{index}", hostname=f"{TJ}-node-0-{index}", subdomain=TJ,
        annotations={INDEX: str(index)}, volumes=volumes,
        containers=[{"name": "node", "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
                     "command": command, "env": [*(env or []), *pet], "volumeMounts": mounts,
                     "ports": [{"containerPort": 29500}]}],
    )  # fmt: skip


def torch_hosts() -> dict[str, str]:
    return jobset_hosts((f"{TJ}-node-0-{i}", TJ, "default", loopback_address(i)) for i in range(2))


# torch 2.13 + gloo sometimes aborts a rank at exit even after barrier + destroy
# (reference/kubeflow/sdk 0.5.0 kubeflow/trainer/backends/kubernetes/backend.py); one such abort earns a single retry, nothing else does.
TEARDOWN_FLAKE = "terminate called without an active exception"


async def run_two(
    tmp_path: Path, pods: list[dict[str, Any]], **ctx: Any
) -> tuple[list[PodResult], list[str]]:
    results, logs = await _run_two(tmp_path / "try1", pods, **ctx)
    if any(not r.succeeded for r in results) and any(TEARDOWN_FLAKE in log for log in logs):
        results, logs = await _run_two(tmp_path / "try2", pods, **ctx)
    return results, logs


async def _run_two(
    tmp_path: Path, pods: list[dict[str, Any]], **ctx: Any
) -> tuple[list[PodResult], list[str]]:
    sandboxes = [
        PodSandbox(pod, make_ctx(tmp_path, pod=f"n{i}", pod_ip=loopback_address(i), hosts=torch_hosts(), **ctx))
        for i, pod in enumerate(pods)
    ]  # fmt: skip
    try:
        results = await asyncio.wait_for(asyncio.gather(*(s.run() for s in sandboxes)), 90)
    except TimeoutError:
        await asyncio.gather(*(s.terminate(grace=1) for s in sandboxes))
        raise
    logs = [s.processes["node"].log_path.read_text() for s in sandboxes]
    return list(results), logs


@pytest.mark.slow
@needs_bwrap
async def test_two_sandboxed_nodes_form_one_gloo_group_and_all_reduce(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "allreduce.py").write_text(ALLREDUCE)
    volumes = [{"name": "code", "hostPath": {"path": str(code), "type": "Directory"}}]
    mounts = [{"name": "code", "mountPath": "/workspace", "readOnly": True}]
    pods = [
        torch_pod(i, ["torchrun", "/workspace/allreduce.py"], volumes, mounts) for i in range(2)
    ]
    results, logs = await run_two(tmp_path, pods)
    assert [r.containers for r in results] == [{"node": 0}, {"node": 0}], "\n".join(logs)
    lines = re.findall(r"rank=(\d) world=(\d) host=(\S+) sum=(\d+)", "\n".join(logs))
    assert sorted(lines) == [
        ("0", "4", "tj-node-0-0", "10"), ("1", "4", "tj-node-0-0", "10"),
        ("2", "4", "tj-node-0-1", "10"), ("3", "4", "tj-node-0-1", "10"),
    ]  # fmt: skip


@pytest.mark.slow
async def test_without_bwrap_torchrun_still_finds_its_peers(tmp_path: Path) -> None:
    # Plain mode: no /etc/hosts of its own, so PET_MASTER_ADDR is rewritten to the master's
    # address and /workspace to the volume's host path. One process per node keeps it short.
    code = tmp_path / "code"
    code.mkdir()
    (code / "allreduce.py").write_text(ALLREDUCE)
    volumes = [{"name": "code", "hostPath": {"path": str(code), "type": "Directory"}}]
    mounts = [{"name": "code", "mountPath": "/workspace", "readOnly": True}]
    command = ["torchrun", "/workspace/allreduce.py"]
    pods = [torch_pod(i, command, volumes, mounts, nproc=1) for i in range(2)]
    results, logs = await run_two(tmp_path, pods, mode="plain")
    assert [r.containers for r in results] == [{"node": 0}, {"node": 0}], "\n".join(logs)
    sums = re.findall(r"rank=(\d) world=(\d) host=\S+ sum=(\d+)", "\n".join(logs))
    assert sorted(sums) == [("0", "2", "3"), ("1", "2", "3")]
