"""What the torch benchmarks share: the DDP training script they time, the TrainJob that runs
it through ``kubetrain run``, and where this venv's commands are."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

__all__ = ["KUBETRAIN", "SCRIPT", "TORCHRUN", "trainjob"]

VENV_BIN = Path(sys.executable).parent
KUBETRAIN = str(VENV_BIN / "kubetrain")
TORCHRUN = str(VENV_BIN / "torchrun")

SCRIPT = textwrap.dedent(
    """\
    import os, torch, torch.distributed as dist
    from torch import nn
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 64, generator=g), torch.randn(64, 1, generator=g)
    for step in range(int(os.environ.get("STEPS", "400"))):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step == 0 and rank == 0:
            print("first step", flush=True)
    if rank == 0:
        print(f"done loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    """
)


def trainjob(name: str, steps: int, *, nodes: int, procs_per_node: int) -> str:
    """A TrainJob on the default ``torch-distributed`` runtime running ``SCRIPT`` for ``steps``."""
    body = textwrap.indent(SCRIPT, " " * 8)
    return f"""\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: {nodes}
    numProcPerNode: {procs_per_node}
    env:
      - name: STEPS
        value: "{steps}"
      - name: OMP_NUM_THREADS
        value: "1"
    command:
      - bash
      - -c
      - |
        cat > /tmp/bench.py <<'PY'
{body}        PY
        exec torchrun /tmp/bench.py
"""
