"""A v1-era training probe: reads only the env Training Operator v1 gave its pods.

``probe.py KEYS MODE``: writes ``/probe/<hostname>.json`` with the named env vars. MODE ``torch``
also joins the process group the way v1 code did without torchrun (env:// from MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK) and all-reduces its rank + 1.
"""

import json
import os
import socket
import sys

out = {k: os.environ.get(k) for k in sys.argv[1].split(",")}
out["hostname"] = socket.gethostname()
if sys.argv[2] == "torch":
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    out["sum"] = t.item()
    out["world"] = dist.get_world_size()
    out["rank"] = dist.get_rank()
    dist.destroy_process_group()
with open(f"/probe/{out['hostname']}.json", "w") as f:
    json.dump(out, f)
print(json.dumps(out), flush=True)
