"""Render throughput on one core: torch runtime, 4 nodes, two runtimePatches.

Prints p50/p99 microseconds per render (one render = snapshot ConfigMap + TJ-tls-config +
JobSet, with the default gates), the wall-clock rate, then, last, ``render: N TrainJobs/s``
computed from the process's CPU time: renders are single-threaded, so CPU seconds are the
one-core cost even when other work shares the machine (wall-clock p99 then mostly measures
preemption). Run with ``python benchmarks/render.py [--seconds S]``; ``taskset -c 0`` pins it.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from kubetrain.runtime import Environment, FeatureGates, render
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.testing import make_trainjob


def workload() -> tuple[dict[str, object], dict[str, object]]:
    """The benchmark's TrainJob and runtime."""
    runtime = next(r for r in default_runtimes() if r["metadata"]["name"] == "torch-distributed")
    job = (
        make_trainjob("bench", "team")
        .uid("0b6f8e58-8a34-4bd5-9a4f-6f0d6f1a2b3c")
        .trainer(
            num_nodes=4,
            image="ghcr.io/acme/train:1.0",
            command=["torchrun", "train.py"],
            env={"LOG_LEVEL": "info", "EPOCHS": "3"},
            resources_per_node={"limits": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi"}},
        )
        .pod_patch(
            "kueue.x-k8s.io/manager",
            "node",
            {
                "nodeSelector": {"pool": "h200"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        )
        .patch("example.com/labels", metadata={"labels": {"team": "ml"}})
        .obj()
    )
    return job, runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time (default 3)")
    args = parser.parse_args()
    job, runtime = workload()
    gates, env = FeatureGates(), Environment()
    for _ in range(200):  # warm caches (framework, quantity parsing)
        render(job, runtime, gates=gates, environment=env)
    gc.collect()
    samples: list[float] = []
    clock = time.perf_counter
    deadline = clock() + args.seconds
    start, cpu_start = clock(), time.process_time()
    while clock() < deadline:
        t0 = clock()
        render(job, runtime, gates=gates, environment=env)
        samples.append(clock() - t0)
    total, cpu = clock() - start, time.process_time() - cpu_start
    samples.sort()
    p50 = statistics.median(samples) * 1e6
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e6
    print(f"renders: {len(samples)} in {total:.2f} s wall, {cpu:.2f} s CPU")
    print(f"p50: {p50:.0f} us per render")
    print(f"p99: {p99:.0f} us per render")
    print(f"wall clock: {len(samples) / total:.0f} TrainJobs/s")
    print(f"render: {len(samples) / cpu:.0f} TrainJobs/s")


if __name__ == "__main__":
    main()
