"""Benchmark: TPE against random search on a known function, applied with kubectl.

One local engine; for each seed, two Experiments (``tpe`` and ``random``, same seed) are
applied with ``kubectl apply -f``; each trial is a 1-node TrainJob of a port-free runtime that
prints ``loss=`` of a bowl around (0.3, 0.7, 0.5) in [0, 1]^3. Printed: each search's best loss
and, per algorithm, the median over seeds. TPE should end lower than random search.

    .venv/bin/python benchmarks/tune_tpe_vs_random.py [--trials 30] [--parallel 3] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_parallel import RUNTIME

__all__ = ["main"]

SCRIPT = (
    "a, b, c = (float(v) for v in ('${trialParameters.a}', '${trialParameters.b}', '${trialParameters.c}'))\n"
    "print(f'loss={(a - 0.3) ** 2 + (b - 0.7) ** 2 + (c - 0.5) ** 2}')\n"
)


def experiment(name: str, algorithm: str, seed: int, trials: int, parallel: int) -> dict[str, Any]:
    settings = [{"name": "random_state", "value": str(seed)}]
    if algorithm == "tpe":  # TPE's first trials are random draws; let the model start early
        settings.append({"name": "n_startup_trials", "value": "5"})
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "algorithm": {
                "algorithmName": algorithm,
                "algorithmSettings": [{"name": "random_state", "value": str(seed)}],
            },
            "maxTrialCount": trials,
            "parallelTrialCount": parallel,
            "objective": {"objectiveMetricName": "loss", "type": "minimize"},
            "parameters": [
                {"name": n, "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
                for n in "abc"
            ],
            "trialTemplate": {
                "primaryContainerName": "node",
                "trialParameters": [{"name": n, "reference": n} for n in "abc"],
                "trialSpec": {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "spec": {
                        "runtimeRef": {"name": "python-nodes", "kind": "TrainingRuntime"},
                        "trainer": {"numNodes": 1, "command": ["python", "-c", SCRIPT]},
                    },
                },
            },
        },
    }


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode:
        raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    from kubetrain.local.daemon import ensure_daemon, stop_daemon

    home = Path(tempfile.mkdtemp(prefix="kubetrain-tpe-bench-"))
    info = ensure_daemon(home)
    config = str(info.kubeconfig)
    best: dict[str, list[float]] = {"tpe": [], "random": []}
    try:
        kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump(RUNTIME))
        for seed in range(args.seeds):
            for algorithm in best:
                name = f"{algorithm}-{seed}"
                kubectl(
                    config,
                    "apply",
                    "-f",
                    "-",
                    stdin=yaml.safe_dump(
                        experiment(name, algorithm, seed, args.trials, args.parallel)
                    ),
                )
                started = time.monotonic()
                kubectl(
                    config,
                    "wait",
                    "--for=condition=Succeeded",
                    f"experiment/{name}",
                    "--timeout=900s",
                )
                got = yaml.safe_load(kubectl(config, "get", "experiment", name, "-o", "yaml"))
                value = float(
                    got["status"]["currentOptimalTrial"]["observation"]["metrics"][0]["latest"]
                )
                best[algorithm].append(value)
                print(
                    f"{name}: best loss {value:.5f} after {args.trials} trials ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
    finally:
        stop_daemon(home, kill_pods=True)
    tpe, rnd = statistics.median(best["tpe"]), statistics.median(best["random"])
    print(f"median best loss: tpe {tpe:.5f}, random {rnd:.5f}")
    return 0 if tpe < rnd else 1


if __name__ == "__main__":
    sys.exit(main())
