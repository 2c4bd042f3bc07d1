"""PlainML: trainer count and ``spec.trainer.env`` for runtimes without a torch/mpi/jax policy
(xgboost, flux, or no mlPolicy at all), trainer v2.3.0 pkg/runtime/framework/plugins/plainml/plainml.go.
"""

from __future__ import annotations

from kubetrain.runtime.core import convert_env_list
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, upsert_env

__all__ = ["PlainML", "new"]


class PlainML:
    """Active exactly when no torch, mpi or jax policy is configured."""

    name = "plainml"

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if any(info.policy(kind) is not None for kind in ("torch", "mpi", "jax")):
            return
        trainer = info.trainer
        if trainer is None:
            return
        info.take_num_nodes()
        container = info.trainer_container()
        if container is not None:
            upsert_env(container, *convert_env_list(trainer.get("env")))


def new(gates: object, env: object) -> PlainML:
    """Always registered."""
    return PlainML()
