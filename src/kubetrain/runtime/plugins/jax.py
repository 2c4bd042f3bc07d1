"""JAX: process count, process id and coordinator address for the trainer container (trainer v2.3.0 pkg/runtime/framework/plugins/jax/jax.go).

``spec.trainer.env`` reaches the container through the JobSet builder, after these.
"""

from __future__ import annotations

from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, env_field_ref, env_value, upsert_env, upsert_port

__all__ = ["JAX", "new"]

TRAINER_PORT = 29500
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


class JAX:
    """Active with ``mlPolicy.jax``."""

    name = "jax"

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if info.policy("jax") is None:
            return
        info.take_num_nodes()
        ps = info.trainer_pod_set()
        trainer = info.trainer
        if trainer is None:
            return
        container = info.trainer_container()
        if container is None:
            return
        name = info.trainjob_name
        nodes = ps.count if ps is not None else 1
        upsert_env(
            container,
            env_value("JAX_NUM_PROCESSES", str(nodes)),
            env_field_ref("JAX_PROCESS_ID", COMPLETION_INDEX),
            env_value("JAX_COORDINATOR_ADDRESS", f"{name}-node-0-0.{name}:{TRAINER_PORT}"),
        )
        upsert_port(container, {"containerPort": TRAINER_PORT})


def new(gates: object, env: object) -> JAX:
    """Always registered."""
    return JAX()
