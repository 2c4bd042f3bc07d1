"""The pod network: what it costs per pod, and what it buys (torch jobs side by side).

1. Set-up cost: the median time to give a pod its network namespace, veth and address
   (`PodNetwork.attach`) and to take it down again, over ``--pods`` pods, plus the one-off
   cost of the network itself (holder namespace, bridge, slirp4netns).
2. Concurrency: one torch TrainJob (2 nodes x 1 process, DDP on gloo, rendezvous on 29500)
   alone, then three of them applied at once. Without a pod network the three queue on port
   29500 (about 3x); with it they run side by side. Prints ``ratio three/one N.NN``.

    .venv/bin/python benchmarks/pod_network.py [--pods 20] [--steps 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torch_jobs import KUBETRAIN, trainjob

from kubetrain.local.sandbox import PodNetwork, bridge_address, network_probe


def setup_cost(pods: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="kubetrain-netbench-"))
    start = time.perf_counter()
    net = PodNetwork.open(work / "net")
    opened = time.perf_counter() - start
    attach, detach = [], []
    try:
        for i in range(pods):
            t0 = time.perf_counter()
            net.attach(work / f"pod{i}", bridge_address(i))
            t1 = time.perf_counter()
            PodNetwork.detach(work / f"pod{i}")
            attach.append(t1 - t0)
            detach.append(time.perf_counter() - t1)
    finally:
        net.close()
    print(f"network set-up (once per daemon): {opened * 1000:.0f} ms")
    print(
        f"per pod: attach median {statistics.median(attach) * 1000:.0f} ms "
        f"(max {max(attach) * 1000:.0f} ms), detach median {statistics.median(detach) * 1000:.1f} ms"
    )


def run_jobs(names: list[str], steps: int, work: Path, env: dict[str, str]) -> float:
    files = []
    for name in names:
        path = work / f"{name}.yaml"
        path.write_text(trainjob(name, steps, nodes=2, procs_per_node=1))
        files.append(path)
    start = time.perf_counter()
    procs = [
        subprocess.Popen([KUBETRAIN, "run", "-f", str(f)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for f in files
    ]  # fmt: skip
    for proc, name in zip(procs, names, strict=True):
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"{name} failed:\n{out[-2000:]}")
    elapsed = time.perf_counter() - start
    for name in names:
        subprocess.run([KUBETRAIN, "delete", name], env=env, capture_output=True)
    return elapsed


def concurrency(steps: int, rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="kubetrain-netbench-"))
    env = {**os.environ, "KUBETRAIN_HOME": str(work / "home"), "OMP_NUM_THREADS": "1"}
    subprocess.run([KUBETRAIN, "daemon", "start"], env=env, check=True, capture_output=True)
    ones, threes = [], []
    try:
        for i in range(rounds):
            ones.append(run_jobs([f"one-{i}"], steps, work, env))
            threes.append(run_jobs([f"three-{i}-{c}" for c in "abc"], steps, work, env))
            print(
                f"round {i + 1}: one {ones[-1]:.2f}s  three at once {threes[-1]:.2f}s", flush=True
            )
    finally:
        subprocess.run([KUBETRAIN, "daemon", "stop", "--kill-pods"], env=env, capture_output=True)
    print(f"ratio three/one {statistics.median(threes) / statistics.median(ones):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    probe = network_probe()
    print(f"network: {'pod' if probe.available else 'host'} ({probe.reason})")
    if probe.available:
        setup_cost(args.pods)
    concurrency(args.steps, args.rounds)


if __name__ == "__main__":
    main()
