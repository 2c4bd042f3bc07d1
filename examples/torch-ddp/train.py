"""Train a small classifier with DistributedDataParallel on CPU (gloo).

Run by torchrun, which reads the PET_* variables the torch runtime injects (PET_NNODES,
PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT). The data is made
here from a fixed seed, so every rank builds the same set without a download and takes its
own shard of it. Rank 0 prints the mean loss of each epoch and saves the model.

    torchrun --nnodes 1 --nproc-per-node 2 train.py --epochs 5 --output-dir /tmp/out
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:  # kubetrain's progress reporter; an image without kubetrain trains all the same
    from kubetrain import progress
except ImportError:
    progress = None

FEATURES, CLASSES, SAMPLES = 16, 8, 4096


def make_data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Points around eight random centres: learnable, but not in one step."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, FEATURES, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    points = centres[labels] + torch.randn(SAMPLES, FEATURES, generator=g) * 0.8
    return points, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "10")))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument(
        "--output-dir", default=os.environ.get("OUTPUT_DIR", "/workspace/output"),
        help="where rank 0 writes model.pt (a mounted volume in the TrainJob)",
    )  # fmt: skip
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts them)

    points, labels = make_data()
    shard = slice(rank, None, world)  # every world-th sample: disjoint, equal-sized shards
    x, y = points[shard], labels[shard]

    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    )
    optimiser = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    if rank == 0:
        print(f"training on {world} processes, {len(x)} samples each", flush=True)

    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        total = torch.zeros(2)  # loss sum, sample count
        for start in range(0, len(x), args.batch_size):
            idx = order[start : start + args.batch_size]
            optimiser.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()  # DDP all-reduces the gradients here
            optimiser.step()
            total += torch.tensor([loss.item() * len(idx), len(idx)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch:3d}  loss {total[0] / total[1]:.4f}", flush=True)
        if progress is not None:
            # Percent, ETA and loss into the TrainJob status: rank 0 sends, off-cluster a no-op.
            mean = round(float(total[0] / total[1]), 4)
            metrics = {"loss": mean, "epoch": epoch}
            progress.report(step=epoch, total_steps=args.epochs, metrics=metrics)

    if rank == 0:
        with torch.no_grad():
            accuracy = (model(points).argmax(dim=1) == labels).float().mean().item()
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), out / "model.pt")
        print(f"accuracy {accuracy:.3f}; model saved to {out / 'model.pt'}", flush=True)

    # Barrier then destroy: without it gloo sometimes aborts a rank at exit (SIGABRT).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
