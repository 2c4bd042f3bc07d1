"""Launch overhead: `kubetrain run` against plain `torchrun --nproc-per-node 4`, same script.

Both run the same DDP training script (fixed steps, 4 workers on this machine, gloo). kubetrain
runs it as a TrainJob on the default `torch-distributed` runtime (1 node x 4 processes, one
sandboxed pod) with the daemon already running (warm) and after `kubetrain daemon stop` (cold,
so the run includes starting the local control plane). Runs alternate plain / warm / cold for
several rounds; the medians give the ratios. Time to first step is when the script's
"first step" line reaches the launching process's stdout.

    .venv/bin/python benchmarks/launch.py [--rounds 3] [--steps 400]

Prints each round, then `ratio warm N.NN`, `ratio cold N.NN` and the extra time to first step.
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

from torch_jobs import KUBETRAIN, SCRIPT, TORCHRUN, trainjob


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time of ``cmd`` and the time its stdout showed the first step."""
    start = time.perf_counter()
    first = float("nan")
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        if first != first and "first step" in line:
            first = time.perf_counter() - start
        tail = [*tail, line][-20:]
    if proc.wait() != 0:
        sys.exit(f"{' '.join(cmd[:3])} failed:\n{''.join(tail)}")
    return time.perf_counter() - start, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kubetrain-launch-"))
    home = work / "home"
    script = work / "bench.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "KUBETRAIN_HOME": str(home),
        "STEPS": str(args.steps),
        "OMP_NUM_THREADS": "1",
    }
    plain_cmd = [TORCHRUN, "--nproc-per-node", "4", str(script)]

    results: dict[str, list[tuple[float, float]]] = {"plain": [], "warm": [], "cold": []}
    subprocess.run([KUBETRAIN, "daemon", "start"], env=env, check=True, capture_output=True)
    for i in range(args.rounds):
        for mode in ("plain", "warm", "cold"):
            if mode == "plain":
                results[mode].append(timed(plain_cmd, env))
                continue
            if mode == "cold":
                subprocess.run(
                    [KUBETRAIN, "daemon", "stop"], env=env, check=True, capture_output=True
                )
            job = work / f"{mode}-{i}.yaml"
            job.write_text(trainjob(f"bench-{mode}-{i}", args.steps, nodes=1, procs_per_node=4))
            results[mode].append(timed([KUBETRAIN, "run", "-f", str(job)], env))
            subprocess.run([KUBETRAIN, "delete", f"bench-{mode}-{i}"], env=env, capture_output=True)
        print(
            f"round {i + 1}: "
            + "  ".join(
                f"{m} {results[m][-1][0]:.2f}s (first step {results[m][-1][1]:.2f}s)"
                for m in results
            ),
            flush=True,
        )
    subprocess.run([KUBETRAIN, "daemon", "stop", "--kill-pods"], env=env, capture_output=True)

    def median(mode: str, index: int) -> float:
        return statistics.median(r[index] for r in results[mode])

    for mode in ("warm", "cold"):
        print(f"extra time to first step {mode}: {median(mode, 1) - median('plain', 1):+.2f}s")
    print(f"ratio warm {median('warm', 0) / median('plain', 0):.2f}")
    print(f"ratio cold {median('cold', 0) / median('plain', 0):.2f}")


if __name__ == "__main__":
    main()
