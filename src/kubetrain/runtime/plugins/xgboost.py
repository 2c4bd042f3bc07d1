"""XGBoost: Rabit tracker address, task id and worker count (trainer v2.3.0 pkg/runtime/framework/plugins/xgboost/xgboost.go), reserved env checks (trainer v2.3.0 pkg/webhooks/).

Runs after PlainML (``PLUGIN_ORDER``), so ``spec.trainer.env`` precedes the DMLC_* vars.
"""

from __future__ import annotations

from kubetrain.api.access import as_list
from kubetrain.api.errors import FieldError
from kubetrain.runtime.framework import ValidationContext
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, env_field_ref, env_value, upsert_env, upsert_port
from kubetrain.runtime.resources import gpu_count

__all__ = ["RESERVED_ENV", "XGBoost", "new"]

TRAINER_PORT = 29500
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RESERVED_ENV = frozenset(
    {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
)


class XGBoost:
    """Active with ``mlPolicy.xgboost``."""

    name = "xgboost"

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        if info.policy("xgboost") is None or not isinstance(info.trainer, dict):
            return []
        env = info.trainer.get("env")
        return [
            FieldError(
                f"spec.trainer.env[{i}]",
                f"{e['name']} is reserved for the XGBoost runtime",
                "Forbidden",
            )
            for i, e in enumerate(as_list(env))
            if isinstance(e, dict) and e.get("name") in RESERVED_ENV
        ]

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if info.policy("xgboost") is None:
            return
        ps = info.trainer_pod_set()
        if ps is None:
            return
        info.take_num_nodes()
        trainer = info.trainer
        if trainer is None:
            return
        container = info.trainer_container()
        if container is None:
            return
        gpus = gpu_count(info.trainer_resources())
        workers = ps.count * (gpus if gpus > 0 else 1)
        name = info.trainjob_name
        upsert_env(
            container,
            env_value("DMLC_TRACKER_URI", f"{name}-node-0-0.{name}"),
            env_value("DMLC_TRACKER_PORT", str(TRAINER_PORT)),
            env_field_ref("DMLC_TASK_ID", COMPLETION_INDEX),
            env_value("DMLC_NUM_WORKER", str(workers)),
        )
        upsert_port(container, {"containerPort": TRAINER_PORT})


def new(gates: object, env: object) -> XGBoost:
    """Always registered."""
    return XGBoost()
