"""Data-parallel logistic regression with MLX over MPI, started by mpirun on the launcher pod.

``mx.distributed.init(backend="mpi")`` joins the MPI job mpirun started from the hostfile the
runtime mounts at /etc/mpi/hostfile. Every rank makes the same data from a fixed seed, keeps
its own shard, and averages its gradients with all ranks (``all_sum``) before each step, so
all ranks hold the same weights. Rank 0 prints the accuracy against the majority baseline;
every rank prints a digest of its weights (identical everywhere).

    mpirun -np 2 python train.py
"""

from __future__ import annotations

import hashlib
import socket

import mlx.core as mx
import numpy as np

FEATURES, SAMPLES, STEPS, LR = 8, 4096, 200, 0.5


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    w_true = rng.normal(size=FEATURES).astype(np.float32)
    return x, (x @ w_true + 0.5 * rng.normal(size=SAMPLES) > 0).astype(np.float32)


def loss_fn(w: mx.array, x: mx.array, y: mx.array) -> mx.array:
    logits = x @ w
    return mx.mean(mx.logaddexp(0.0, logits) - y * logits)


def main() -> None:
    group = mx.distributed.init(backend="mpi", strict=True)
    rank, world = group.rank(), group.size()
    total = mx.distributed.all_sum(mx.array([float(rank + 1)]))
    mx.eval(total)  # MLX is lazy: a collective must run on every rank, so run it now

    x_all, y_all = make_data()
    x, y = mx.array(x_all[rank::world]), mx.array(y_all[rank::world])
    w = mx.zeros((FEATURES,))
    grad_fn = mx.grad(loss_fn)
    for _ in range(STEPS):
        grad = mx.distributed.all_sum(grad_fn(w, x, y)) / world
        w = w - LR * grad
        mx.eval(w)

    digest = hashlib.sha256(np.array(w).tobytes()).hexdigest()[:16]
    print(f"rank {rank}/{world} on {socket.gethostname()}: weights digest {digest}", flush=True)
    if rank == 0:
        accuracy = float(((x_all @ np.array(w) > 0) == y_all).mean())
        baseline = float(max(y_all.mean(), 1 - y_all.mean()))
        print(f"all_sum(rank + 1) = {int(total.item())} (expected {world * (world + 1) // 2})")
        print(f"accuracy {accuracy:.3f} vs majority baseline {baseline:.3f}", flush=True)


if __name__ == "__main__":
    main()
