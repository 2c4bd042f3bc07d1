"""Benchmark: deleting N suspended TrainJobs from a running local engine (issue 13, finding 10).

Starts a daemon in a fresh KUBETRAIN_HOME (API server, controller, executor in one process),
creates N suspended TrainJobs, waits until every one has its JobSet, then deletes them the way
``kubectl delete trainjobs --all`` does (one DELETE per object, in turn) and reports:

- create: seconds to create the N TrainJobs and see their JobSets;
- delete requests: seconds for the N DELETE requests, and the slowest one;
- settled: seconds from the first DELETE until no TrainJob and no JobSet is left;
- daemon CPU seconds spent over the deletion.

With ``--via kubectl`` (or ``kubetrain``) the deletion is ``kubectl delete trainjobs --all``
(or ``kubetrain delete trainjobs --all``) itself, its wait included.

    .venv/bin/python benchmarks/delete_suspended.py [--jobs 100 500] [--via api|kubectl|kubetrain]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _count(kube: Any, api_version: str, plural: str) -> int:
    items, _ = await kube.list(api_version, plural, namespace="default")
    return len(items)


async def _run_once(n: int, home: Path, via: str) -> dict[str, float]:
    from kubetrain.kube.client import connect
    from kubetrain.local.daemon import start_daemon, stop_daemon

    info = start_daemon(home, timeout=120)
    try:
        kube = connect(info.kubeconfig)
        try:
            return await _measure(kube, n, info.pid, info.kubeconfig, via)
        finally:
            await kube.close()
    finally:
        stop_daemon(home, kill_pods=True, timeout=20)


async def _measure(kube: Any, n: int, pid: int, kubeconfig: Path, via: str) -> dict[str, float]:
    t0 = time.monotonic()
    for i in range(n):
        body = {
            "apiVersion": TRAINER,
            "kind": "TrainJob",
            "metadata": {"name": f"job-{i:04d}", "namespace": "default"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True},
        }
        await kube.create(TRAINER, "trainjobs", body)
    deadline = time.monotonic() + 300
    while await _count(kube, JOBSET, "jobsets") < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the JobSets did not all appear within 300 s")
        await asyncio.sleep(0.2)
    created = time.monotonic() - t0
    cpu0 = _cpu_s(pid)
    t1 = time.monotonic()
    slowest = 0.0
    if via in ("kubectl", "kubetrain"):
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        argv = ["trainjobs", "--all", "-n", "default"]
        tool = ["kubectl"] if via == "kubectl" else [sys.executable, "-m", "kubetrain.cli.main"]
        argv += ["--kubeconfig", str(kubeconfig)]
        subprocess.run(
            [*tool, "delete", *argv],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=600,
        )
    else:
        for i in range(n):
            t = time.monotonic()
            await kube.delete(TRAINER, "trainjobs", f"job-{i:04d}", namespace="default")
            slowest = max(slowest, time.monotonic() - t)
    requests = time.monotonic() - t1
    while await _count(kube, TRAINER, "trainjobs") or await _count(kube, JOBSET, "jobsets"):
        if time.monotonic() - t1 > 600:
            raise RuntimeError("objects left 600 s after the deletion")
        await asyncio.sleep(0.1)
    settled = time.monotonic() - t1
    cpu = _cpu_s(pid) - cpu0
    return {
        "create_s": created,
        "delete_requests_s": requests,
        "slowest_request_s": slowest,
        "settled_s": settled,
        "daemon_cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100])
    parser.add_argument(
        "--via",
        choices=("api", "kubectl", "kubetrain"),
        default="api",
        help="one DELETE per TrainJob (api), `kubectl delete trainjobs --all`, or "
        "`kubetrain delete trainjobs --all`",
    )
    args = parser.parse_args()
    for n in args.jobs:
        if not 1 <= n <= 2000:
            parser.error("--jobs: each count must be 1..2000 (a bounded benchmark)")
        with tempfile.TemporaryDirectory(prefix="kt-bench-delete-") as tmp:
            result = asyncio.run(_run_once(n, Path(tmp) / "home", args.via))
        figures = "  ".join(f"{k}={v:.2f}" for k, v in result.items())
        print(f"jobs={n}  {figures}", flush=True)


if __name__ == "__main__":
    main()
