"""Data-parallel linear regression over MPI (mpi4py), started by mpirun on the launcher pod.

mpirun reads the hostfile the MPI runtime mounts at /etc/mpi/hostfile (one line per pod,
``slots=`` processes each) and starts the ranks over ssh. Every rank makes the same data
from a fixed seed, keeps its own shard, and takes full-batch gradient steps: the gradients
are summed across all ranks with ``Allreduce``, so every rank holds the same weights after
every step. Rank 0 prints the evidence: which pods ran ranks, an allreduce of 1..N, the loss
before and after, and whether all ranks ended with bit-identical weights.

    mpirun -np 4 python train.py
"""

from __future__ import annotations

import hashlib

import numpy as np
from mpi4py import MPI

FEATURES, SAMPLES, STEPS, LR = 8, 4096, 100, 0.1


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=FEATURES)
    x = rng.normal(size=(SAMPLES, FEATURES))
    return x, x @ w_true + 0.1 * rng.normal(size=SAMPLES), w_true


def global_loss(comm: MPI.Comm, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float(comm.allreduce(float(((x @ w - y) ** 2).sum()), op=MPI.SUM)) / SAMPLES


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    ones_to_n = comm.allreduce(rank + 1, op=MPI.SUM)

    x, y, w_true = make_data()
    xs, ys = x[rank::world], y[rank::world]  # disjoint shards, together the whole set
    w = np.zeros(FEATURES)
    first = global_loss(comm, xs, ys, w)
    for _ in range(STEPS):
        local = 2.0 * xs.T @ (xs @ w - ys)
        grad = np.empty_like(local)
        comm.Allreduce(local, grad, op=MPI.SUM)
        w -= LR * grad / SAMPLES
    last = global_loss(comm, xs, ys, w)

    digests = comm.gather(hashlib.sha256(w.tobytes()).hexdigest()[:16], root=0)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if rank == 0:
        assert digests is not None and hosts is not None
        print(f"{world} ranks on {len(set(hosts))} pods: {', '.join(sorted(set(hosts)))}")
        print(f"allreduce(rank + 1) = {ones_to_n} (expected {world * (world + 1) // 2})")
        print(f"loss {first:.4f} -> {last:.4f}; distance to true weights "
              f"{float(np.linalg.norm(w - w_true)):.4f}")  # fmt: skip
        same = len(set(digests)) == 1
        print(f"weights identical on all {world} ranks: {same} (digest {digests[0]})", flush=True)


if __name__ == "__main__":
    main()
