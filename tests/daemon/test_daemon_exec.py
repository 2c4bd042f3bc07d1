"""The daemon joins its API server to its kubelet: ``kubectl exec`` into a TrainJob's rank."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import POD, TRAINJOB
from kubetrain.local.daemon import ensure_daemon
from kubetrain.testing import make_trainjob


async def _running_pods(api: KubeClient, name: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        items, _ = await api.list(
            POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
        )
        if len(items) == count and all(p["status"].get("phase") == "Running" for p in items):
            return sorted(items, key=lambda p: p["metadata"]["name"])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the pods of {name} did not all run")


async def test_kubectl_exec_reaches_each_rank_of_a_trainjob(home: Path) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    trainjob = make_trainjob("sleepy").trainer(num_nodes=2, command=["sleep", "300"]).obj()
    try:
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        pods = await _running_pods(api, "sleepy", 2)
        ranks = []
        for pod in pods:
            done = await asyncio.to_thread(
                subprocess.run,
                ["kubectl", "--kubeconfig", str(info.kubeconfig), "--cache-dir",
                 str(home / "kubectl-cache"), "exec", pod["metadata"]["name"], "--",
                 "sh", "-c", "echo $PET_NODE_RANK"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            ranks.append(done.stdout.strip())
        assert sorted(ranks) == ["0", "1"]
    finally:
        await api.close()
