"""A v1-era training probe: reads only the env Training Operator v1 gave its pods.

``probe.py KEYS MODE``: writes ``/probe/<hostname>.json`` with the named env vars. Other modes
also join the framework's group the way v1 code did, from v1's env only, and all-reduce (or
all-gather) rank + 1: ``torch`` (env:// from MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, no
torchrun), ``jax`` (COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID), ``xgboost``
(rank 0 runs the Rabit tracker on MASTER_ADDR:MASTER_PORT; WORLD_SIZE, RANK), ``tf`` (each task
behaves as a TF server of TF_CONFIG's cluster, see below).
"""

import json
import os
import socket
import sys
import time

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
elif sys.argv[2] == "jax":
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    jax.distributed.initialize(
        coordinator_address=f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}",
        num_processes=int(os.environ["NUM_PROCESSES"]),
        process_id=int(os.environ["PROCESS_ID"]),
    )
    gathered = multihost_utils.process_allgather(jnp.array([jax.process_index() + 1]))
    out["sum"] = float(gathered.sum())
    out["world"] = jax.process_count()
    out["rank"] = jax.process_index()
    multihost_utils.sync_global_devices("done")  # the coordinator stays up until all are done
elif sys.argv[2] == "xgboost":
    import numpy as np
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = socket.gethostbyname(os.environ["MASTER_ADDR"]), int(os.environ["MASTER_PORT"])
    if rank == 0:
        tracker = RabitTracker(n_workers=world, host_ip=host, port=port, sortby="task")
        tracker.start()
    args = {
        "dmlc_tracker_uri": host,
        "dmlc_tracker_port": port,
        "dmlc_task_id": str(rank),
        "dmlc_retry": 30,
        "dmlc_timeout": 60,
    }
    with collective.CommunicatorContext(**args):
        total = collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)
        out["sum"] = float(total[0])
        out["world"] = collective.get_world_size()
        out["rank"] = collective.get_rank()
elif sys.argv[2] == "tf":
    # As TF's servers do: every task serves on its own address in TF_CONFIG's cluster, and the
    # chief (the coordinator) reaches every other task before it starts. v1 (and the converted
    # runtime) end the job when the chief succeeds, deleting the tasks still running, so a chief
    # that did not wait could finish before a slow worker ever started.
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    me = config["cluster"][task["type"]][task["index"]]
    others = [a for addrs in config["cluster"].values() for a in addrs if a != me]
    deadline = time.monotonic() + 120
    if task["type"] != "chief":
        host, port = me.rsplit(":", 1)
        with open(f"/probe/{out['hostname']}.json", "w") as f:
            json.dump(out, f)  # before serving: once the chief reached a task, its report exists
        server = socket.create_server((socket.gethostbyname(host), int(port)))
        server.settimeout(max(deadline - time.monotonic(), 1))
        while True:  # like tf.distribute.Server.join(): until the job ends and deletes the pod
            server.accept()[0].close()
    for address in others:
        host, port = address.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    out["reached"] = sorted(others)
with open(f"/probe/{out['hostname']}.json", "w") as f:
    json.dump(out, f)
print(json.dumps(out), flush=True)
