"""Train a gradient-boosted classifier across pods with XGBoost's collective (Rabit).

The xgboost runtime injects DMLC_TRACKER_URI (rank 0's pod), DMLC_TRACKER_PORT,
DMLC_TASK_ID (this pod's rank) and DMLC_NUM_WORKER. As upstream's runtime expects, rank 0
starts the Rabit tracker itself; every rank then joins the communicator, takes its own shard
of a data set made here from a fixed seed, and trains one model: each tree's split
statistics are all-reduced across ranks, so every rank ends with the same model. Each rank
prints the model's digest (identical everywhere) and rank 0 its accuracy against the
majority-class baseline.

    DMLC_TRACKER_URI=127.0.0.1 DMLC_TRACKER_PORT=29500 DMLC_TASK_ID=0 DMLC_NUM_WORKER=1 \
        python train.py
"""

from __future__ import annotations

import hashlib
import os
import socket

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

FEATURES, SAMPLES, ROUNDS = 10, 8000, 30


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels from a noisy non-linear rule: trees beat the baseline, but need many splits."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES))
    score = x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2]) + 0.5 * x[:, 3] + rng.normal(0.3, size=SAMPLES)
    return x, (score > 0).astype(np.float32)


def main() -> None:
    rank = int(os.environ["DMLC_TASK_ID"])
    world = int(os.environ["DMLC_NUM_WORKER"])
    port = int(os.environ["DMLC_TRACKER_PORT"])
    # The tracker binds this address: rank 0's own pod address, so nothing else is taken.
    host = socket.gethostbyname(os.environ["DMLC_TRACKER_URI"])

    tracker = None
    if rank == 0:
        tracker = RabitTracker(n_workers=world, host_ip=host, port=port, sortby="task")
        tracker.start()

    args = {
        "dmlc_tracker_uri": host,
        "dmlc_tracker_port": port,
        "dmlc_task_id": str(rank),
        "dmlc_retry": 30,  # the other ranks may start before rank 0's tracker listens
        "dmlc_timeout": 60,
    }
    with collective.CommunicatorContext(**args):
        x, y = make_data()
        shard = slice(collective.get_rank(), None, collective.get_world_size())
        rows = collective.allreduce(np.array([len(y[shard])], dtype=np.int64), collective.Op.SUM)
        booster = xgb.train(
            {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "tree_method": "hist"},
            xgb.DMatrix(x[shard], label=y[shard]),
            num_boost_round=ROUNDS,
        )
        digest = hashlib.sha256(booster.save_raw("ubj")).hexdigest()[:16]
        rank = collective.get_rank()
        print(
            f"rank {rank}/{collective.get_world_size()}: trained on "
            f"{len(y[shard])} of {int(rows[0])} rows (allreduce); model digest {digest}",
            flush=True,
        )
    if tracker is not None:
        tracker.wait_for()
        # After the communicator is gone: building a DMatrix inside it is a collective step
        # every rank would have to join.
        accuracy = float(((booster.predict(xgb.DMatrix(x)) > 0.5) == y).mean())
        baseline = float(max(y.mean(), 1 - y.mean()))
        print(f"accuracy {accuracy:.3f} vs majority baseline {baseline:.3f}", flush=True)


if __name__ == "__main__":
    main()
