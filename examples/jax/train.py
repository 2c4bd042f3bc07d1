"""Data-parallel linear regression with JAX across processes (one per pod) on CPU.

The jax runtime injects JAX_COORDINATOR_ADDRESS (rank 0's pod, port 29500),
JAX_NUM_PROCESSES and JAX_PROCESS_ID; ``jax.distributed.initialize`` joins every process to
one runtime, so ``jax.devices()`` lists the CPU devices of all pods. Every process makes the
same data from a fixed seed, keeps its own shard, and averages gradients across processes
(``process_allgather``, a jitted collective over all devices) before each step, so every
process holds the same weights. Each process prints a digest of its weights; process 0 also
prints the loss before and after.

    JAX_COORDINATOR_ADDRESS=127.0.0.1:29500 JAX_NUM_PROCESSES=1 JAX_PROCESS_ID=0 python train.py
"""

from __future__ import annotations

import hashlib
import os
import socket

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

FEATURES, SAMPLES, STEPS, LR = 8, 4096, 100, 0.1


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    w_true = rng.normal(size=FEATURES).astype(np.float32)
    return x, x @ w_true + 0.1 * rng.normal(size=SAMPLES).astype(np.float32)


def loss_fn(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((x @ w - y) ** 2)


def main() -> None:
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
    rank, world = jax.process_index(), jax.process_count()
    ranks = multihost_utils.process_allgather(jnp.array([rank + 1]))

    x_all, y_all = make_data()
    x, y = jnp.asarray(x_all[rank::world]), jnp.asarray(y_all[rank::world])
    grad_fn = jax.jit(jax.grad(loss_fn))
    w = jnp.zeros(FEATURES)
    first = float(loss_fn(w, jnp.asarray(x_all), jnp.asarray(y_all)))
    for _ in range(STEPS):
        grads = multihost_utils.process_allgather(grad_fn(w, x, y))  # (world, FEATURES)
        w = w - LR * grads.mean(axis=0)
    last = float(loss_fn(w, jnp.asarray(x_all), jnp.asarray(y_all)))

    digest = hashlib.sha256(np.asarray(w).tobytes()).hexdigest()[:16]
    print(
        f"process {rank}/{world} on {socket.gethostname()} "
        f"({len(jax.devices())} devices in all): weights digest {digest}",
        flush=True,
    )
    if rank == 0:
        print(f"allgather(rank + 1) = {np.asarray(ranks).ravel().tolist()}")
        print(f"loss {first:.4f} -> {last:.4f}", flush=True)
    # Keep the coordinator (process 0) up until every process is done with it.
    multihost_utils.sync_global_devices("done")


if __name__ == "__main__":
    main()
