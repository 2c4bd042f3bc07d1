"""Benchmark of the embedded API server: creates/s, a 5,000-object list, watch fan-out latency.

The server runs as ``kubetrain serve`` does, in its own process (https, bearer token, SQLite in
a temporary KUBETRAIN_HOME); the client is aiohttp in this process with a pool of keep-alive
connections. Targets from the issue: >= 500 creates/s and a 5,000-object list in < 1 s.

    .venv/bin/python benchmarks/apiserver.py [--creates 2000] [--objects 5000] [--watchers 50]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

__all__ = ["main"]

SERVE = (
    "import argparse, sys\n"
    "from kubetrain.cli import cmd_serve\n"
    "p = argparse.ArgumentParser(); cmd_serve.add_arguments(p)\n"
    "sys.exit(cmd_serve.run(p.parse_args(sys.argv[1:])))\n"
)
TJ = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
CM = "/api/v1/namespaces/default/configmaps"


def _start(home: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    kubeconfig = home / "kubeconfig"
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return proc, yaml.safe_load(kubeconfig.read_text())


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux), to report cost independent of machine load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _session(config: dict[str, Any], limit: int) -> aiohttp.ClientSession:
    cluster = config["clusters"][0]["cluster"]
    ctx = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    token = config["users"][0]["user"]["token"]
    return aiohttp.ClientSession(
        cluster["server"],
        connector=aiohttp.TCPConnector(ssl=ctx, limit=limit),
        headers={"Authorization": f"Bearer {token}"},
    )


def _trainjob(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": f"job-{i}", "labels": {"bench": "yes"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "image": "example/train:1"},
            # `kubetrain serve` runs the whole control plane: suspended, the controller renders
            # a JobSet per TrainJob (load the server also carries) but no pod process starts.
            "suspend": True,
        },
    }


async def _creates(session: aiohttp.ClientSession, count: int, concurrency: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            async with session.post(TJ, json=_trainjob(i)) as r:
                if r.status != 201:
                    raise SystemExit(f"create failed: {r.status} {await r.text()}")
                await r.read()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def _fill(session: aiohttp.ClientSession, count: int) -> None:
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        body = {
            "metadata": {"name": f"cm-{i}", "labels": {"bench": "yes", "i": str(i)}},
            "data": {"key": "x" * 200},
        }
        async with sem, session.post(CM, json=body) as r:
            await r.read()

    await asyncio.gather(*(one(i) for i in range(count)))


async def _list_time(
    session: aiohttp.ClientSession, path: str, repeat: int = 3
) -> tuple[float, int]:
    best = float("inf")
    items = 0
    for _ in range(repeat):
        started = time.perf_counter()
        async with session.get(path) as r:
            body = await r.json()
        best = min(best, time.perf_counter() - started)
        items = len(body["items"])
    return best, items


async def _fan_out(session: aiohttp.ClientSession, watchers: int, events: int) -> list[float]:
    async with session.get(f"{CM}?limit=1") as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    latencies: list[float] = []
    ready = asyncio.Event()
    opened = 0

    async def watch() -> None:
        nonlocal opened
        seen = 0
        async with session.get(f"{CM}?watch=1&resourceVersion={rv}&labelSelector=fan%3Dout") as r:
            opened += 1
            if opened == watchers:
                ready.set()
            async for line in r.content:
                now = time.perf_counter()
                name = line.split(b'"name":"', 1)[1].split(b'"', 1)[0].decode()
                latencies.append(now - sent[name])
                seen += 1
                if seen == events:
                    return

    tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
    await asyncio.wait_for(ready.wait(), 30)
    await asyncio.sleep(0.2)
    for i in range(events):
        name = f"fan-{i}"
        sent[name] = time.perf_counter()
        async with session.post(
            CM, json={"metadata": {"name": name, "labels": {"fan": "out"}}}
        ) as r:
            await r.read()
        await asyncio.sleep(0.01)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return latencies


async def _run(args: argparse.Namespace, config: dict[str, Any], pid: int) -> None:
    async with _session(config, limit=args.watchers + 64) as session:
        cpu = _cpu_seconds(pid)
        rate = await _creates(session, args.creates, args.concurrency)
        per_create = (_cpu_seconds(pid) - cpu) / args.creates
        print(
            f"creates/s (TrainJob, {args.creates} with {args.concurrency} in flight): {rate:,.0f}   target >= 500"
        )
        print(
            f"  server CPU per create: {per_create * 1000:.2f} ms (all its threads) = {1 / per_create:,.0f}/s per free core"
        )
        await _fill(session, args.objects)
        cpu = _cpu_seconds(pid)
        seconds, items = await _list_time(session, CM)
        list_cpu = (_cpu_seconds(pid) - cpu) / 3
        print(
            f"list of {items:,} ConfigMaps: {seconds * 1000:,.0f} ms   target < 1000 ms (server CPU {list_cpu * 1000:,.0f} ms)"
        )
        seconds, items = await _list_time(session, TJ)
        print(f"list of {items:,} TrainJobs: {seconds * 1000:,.0f} ms")
        seconds, items = await _list_time(session, f"{CM}?labelSelector=i%3D42")
        print(f"label-selected list ({items} of {args.objects:,}): {seconds * 1000:,.1f} ms")
        latencies = await _fan_out(session, args.watchers, args.events)
        q = statistics.quantiles(latencies, n=100)
        print(
            f"watch fan-out ({args.watchers} watchers x {args.events} events): "
            f"p50 {q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms (create sent -> event read)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubetrain-bench-") as tmp:
        proc, config = _start(Path(tmp))
        try:
            load = os.getloadavg()[0]
            print(
                f"cores: {os.cpu_count()}, load average {load:.1f}; server: kubetrain serve (https, SQLite WAL), own process"
            )
            asyncio.run(_run(args, config, proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
