"""Three torch TrainJobs at once on the pod network: every one binds 29500, all run together.

Without a pod network the engine runs them one after another (they share the host's ports);
with it each pod has its own network namespace. To show that the three ran *at the same time*
and not merely all finished, rank 0 of each job meets rank 0 of the two others by their pod
DNS names on port 29501 before training; a job that had to wait for another would never meet it.
"""

from __future__ import annotations

import asyncio
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from frameworks_plane import bwrap_usable

from kubetrain.kube.client import connect
from kubetrain.kube.kinds import TRAINJOB
from kubetrain.local.daemon import ensure_daemon
from kubetrain.local.sandbox import network_probe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bwrap_usable(), reason="needs bubblewrap and openssh-server"),
    pytest.mark.skipif(not network_probe().available, reason=network_probe().reason),
]

JOBS = ("red", "green", "blue")

SCRIPT = textwrap.dedent(
    """\
    import os, socket, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    me, others = os.environ["JOB"], os.environ["OTHERS"].split()
    if dist.get_rank() == 0:
        s = socket.socket(); s.bind(("0.0.0.0", 29501)); s.listen(8)
        for other in others:
            deadline = time.monotonic() + 60
            while True:
                try:
                    c = socket.create_connection((f"{other}-node-0-0.{other}", 29501), timeout=2)
                    break
                except OSError:
                    if time.monotonic() > deadline: raise
                    time.sleep(0.1)
            c.sendall(me.encode()); c.close()
        met = sorted(s.accept()[0].recv(64).decode() for _ in others)
        print("met", *met, flush=True)
    t = torch.ones(1); dist.all_reduce(t)
    print("sum", int(t.item()), flush=True)
    dist.destroy_process_group()
    """
)


def trainjob(name: str) -> dict[str, Any]:
    others = " ".join(j for j in JOBS if j != name)
    command = f"cat > /tmp/meet.py <<'PY'\n{SCRIPT}PY\nexec torchrun /tmp/meet.py\n"
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "numProcPerNode": 1,
                "command": ["bash", "-c", command],
                "env": [
                    {"name": "JOB", "value": name},
                    {"name": "OTHERS", "value": others},
                    {"name": "OMP_NUM_THREADS", "value": "1"},
                ],
            },
        },
    }


def _finished(obj: dict[str, Any]) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return str(c["type"])
    return None


async def test_three_torch_jobs_on_port_29500_run_at_the_same_time_and_complete(
    home: Path,
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        await asyncio.gather(
            *(api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob(n)) for n in JOBS)
        )
        deadline = time.monotonic() + 120
        while True:
            objs = [
                await api.get(TRAINJOB.api_version, TRAINJOB.plural, n, namespace="default")
                for n in JOBS
            ]
            ends = [_finished(o) for o in objs]
            if all(ends) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
    finally:
        await api.close()
    logs = {
        n: "".join(p.read_text() for p in sorted((home / "logs" / "default").glob(f"{n}-*/*.log")))
        for n in JOBS
    }
    assert ends == ["Complete"] * 3, logs
    for name in JOBS:
        others = sorted(j for j in JOBS if j != name)
        assert f"met {' '.join(others)}" in logs[name], logs[name]
        assert logs[name].count("sum 2") == 2, logs[name]
