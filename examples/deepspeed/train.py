"""Train a small regression network with DeepSpeed on CPU, started by mpirun on the launcher.

mpirun starts one process per hostfile slot; ``deepspeed.init_distributed`` discovers rank,
world size and rank 0's address from MPI and forms a gloo process group. The DeepSpeed engine
then averages gradients across all ranks at every step, so every rank holds the same weights.
Data is made here from a fixed seed; each rank draws its own batches. Rank 0 prints the loss
as it falls; every rank prints a digest of its weights (identical everywhere).

Without a GPU DeepSpeed picks its CPU accelerator by itself; on a GPU cluster the same script
trains on CUDA (use the nccl backend there).

    mpirun -np 2 python train.py
"""

from __future__ import annotations

import hashlib
import socket

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.accelerator import get_accelerator
from torch import nn

FEATURES, STEPS, BATCH = 8, 60, 32


def main() -> None:
    if get_accelerator().device_name() == "cpu":
        # On CPU DeepSpeed would first JIT-compile its shared-memory allreduce kernel, which
        # takes minutes and only helps ranks that share a host; gloo does the allreduce.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere
    w_true = torch.randn(FEATURES, 1)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    config = {
        "train_micro_batch_size_per_gpu": BATCH,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
        "zero_optimization": {"stage": 0},
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(1, STEPS + 1):
        x = torch.randn(BATCH, FEATURES, generator=data)
        loss = nn.functional.mse_loss(engine(x), x @ w_true)
        engine.backward(loss)  # DeepSpeed all-reduces the gradients here
        engine.step()
        total = loss.detach().reshape(1)
        dist.all_reduce(total)
        if rank == 0 and step % 20 == 0:
            print(f"step {step:3d}  mean loss over {world} ranks {total.item() / world:.4f}")

    flat = torch.cat([p.detach().flatten() for p in engine.module.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
    print(f"rank {rank}/{world} on {socket.gethostname()}: weights digest {digest}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
