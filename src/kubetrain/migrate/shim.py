"""v1's env contract, rebuilt for v2 pods (reference §2.8, §5.6).

Training code written for Training Operator v1 reads env the v1 operator injected
(``MASTER_ADDR``/``WORLD_SIZE``/``RANK``, ``TF_CONFIG``, ``COORDINATOR_*``, ``PADDLE_*``, ...).
Trainer v2 injects other names (torchrun's ``PET_*``, ``JAX_*``, ``DMLC_*``) or nothing. The shim
sets v1's names with the values v1 would have given, pointing at the v2 pods: rank/index from
the completion-index annotation (JobSet's child Jobs are Indexed), hosts ``<TJ>-<job>-0-<i>.<TJ>``.
Runtime-reserved names (``PET_*``, ``DMLC_*``, ``OMPI_MCA_*``) are never set here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubetrain.api.access import list_at
from kubetrain.runtime.plugins.torch import COMPLETION_INDEX, TRAINER_PORT
from kubetrain.runtime.podspec import env_field_ref, env_value

__all__ = [
    "V1_INJECTED",
    "host",
    "jax_env",
    "launches_torchrun",
    "needs_rdzv_endpoint",
    "paddle_env",
    "tf_env",
    "torch_env",
    "xgboost_env",
]

Obj = dict[str, Any]

# What the v1 operator set on its pods, per kind: a user's own value of these was overwritten.
V1_INJECTED: dict[str, frozenset[str]] = {
    "PyTorchJob": frozenset(
        {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED"}
    ),
    "XGBoostJob": frozenset(
        {
            "MASTER_ADDR",
            "MASTER_PORT",
            "WORLD_SIZE",
            "RANK",
            "WORKER_ADDRS",
            "WORKER_PORT",
            "PYTHONUNBUFFERED",
        }
    ),
    "JAXJob": frozenset(
        {
            "COORDINATOR_ADDRESS",
            "COORDINATOR_PORT",
            "NUM_PROCESSES",
            "PROCESS_ID",
            "PYTHONUNBUFFERED",
        }
    ),
    "PaddleJob": frozenset(
        {
            "PADDLE_MASTER",
            "PADDLE_NNODES",
            "PADDLE_JOB_ID",
            "PADDLE_SERVER_NUM",
            "PADDLE_TRAINER_NUM",
            "PYTHONUNBUFFERED",
        }
    ),
    "TFJob": frozenset({"TF_CONFIG"}),
    "MPIJob": frozenset({"K_MPI_JOB_ROLE"}),
}

_TORCHRUN = re.compile(r"(^|[\s/])torchrun(\s|$)|torch\.distributed\.(run|launch)\b")


def host(trainjob: str, job: str, index: int) -> str:
    """The DNS name of pod ``index`` of replicated job ``job`` (JobSet's subdomain = TJ)."""
    return f"{trainjob}-{job}-0-{index}.{trainjob}"


def _words(container: Obj) -> str:
    return " ".join(str(w) for w in [*list_at(container, "command"), *list_at(container, "args")])


def launches_torchrun(container: Obj) -> bool:
    """torchrun reads PET_*, which v2 injects: such commands need no shim."""
    return bool(_TORCHRUN.search(_words(container)))


def needs_rdzv_endpoint(container: Obj) -> bool:
    """An elastic torchrun command that relied on v1's PET_RDZV_ENDPOINT."""
    words = _words(container)
    return "--rdzv_backend" in words.replace("-rdzv-backend", "-rdzv_backend") and not re.search(
        r"--rdzv[_-]endpoint", words
    )


def _index(name: str) -> Obj:
    return env_field_ref(name, COMPLETION_INDEX)


def torch_env(trainjob: str, num_nodes: int, nproc: int) -> list[Obj]:
    """v1 with a Master: env:// rendezvous on rank 0; RANK is the node rank, as v1 gave it."""
    return [
        env_value("MASTER_ADDR", host(trainjob, "node", 0)),
        env_value("MASTER_PORT", str(TRAINER_PORT)),
        env_value("WORLD_SIZE", str(num_nodes * nproc)),
        _index("RANK"),
        env_value("PYTHONUNBUFFERED", "1"),
    ]


def xgboost_env(trainjob: str, num_nodes: int, port: int) -> list[Obj]:
    """v1's Rabit contract: rank 0 (the Master) runs the tracker on MASTER_ADDR:MASTER_PORT."""
    env = [
        env_value("MASTER_ADDR", host(trainjob, "node", 0)),
        env_value("MASTER_PORT", str(port)),
        env_value("WORLD_SIZE", str(num_nodes)),
        _index("RANK"),
        env_value("PYTHONUNBUFFERED", "1"),
    ]
    if num_nodes > 1:
        workers = ",".join(host(trainjob, "node", i) for i in range(1, num_nodes))
        env[2:2] = [env_value("WORKER_PORT", str(port)), env_value("WORKER_ADDRS", workers)]
    return env


def jax_env(trainjob: str, num_nodes: int) -> list[Obj]:
    """v1's JAX contract: process 0 coordinates."""
    return [
        env_value("COORDINATOR_ADDRESS", host(trainjob, "node", 0)),
        env_value("COORDINATOR_PORT", str(TRAINER_PORT)),
        env_value("NUM_PROCESSES", str(num_nodes)),
        _index("PROCESS_ID"),
        env_value("PYTHONUNBUFFERED", "1"),
    ]


def paddle_env(
    trainjob: str, master_job: str, port: int, total: int, role_num: str | None
) -> list[Obj]:
    """v1's Paddle contract; ``role_num`` is PADDLE_SERVER_NUM/PADDLE_TRAINER_NUM in PS mode."""
    env = [
        env_value("PADDLE_MASTER", f"{host(trainjob, master_job, 0)}:{port}"),
        env_value("PADDLE_NNODES", str(total)),
        env_value("PADDLE_JOB_ID", trainjob),
        env_value("PYTHONUNBUFFERED", "1"),
    ]
    if role_num is not None:
        env.append(env_value(role_num, "1"))
    return env


def tf_env(trainjob: str, cluster: dict[str, list[str]], role: str) -> list[Obj]:
    """TF_CONFIG per pod without a shell: TF_TASK_INDEX first, so ``$(TF_TASK_INDEX)`` expands."""
    config = json.dumps(
        {"cluster": cluster, "task": {"type": role, "index": 0}, "environment": "cloud"},
        separators=(",", ":"),
    ).replace('"index":0', '"index":$(TF_TASK_INDEX)')
    return [_index("TF_TASK_INDEX"), env_value("TF_CONFIG", config)]
