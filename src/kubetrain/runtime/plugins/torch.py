"""Torch: torchrun's PET_* env, numProcPerNode, envInjection targets, TorchTune (trainer v2.3.0
pkg/runtime/framework/plugins/torch/).

Order inside the trainer container matches upstream: runtime env, then ``spec.trainer.env``, then
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT (the last two
not in TorchTune mode, whose command is rewritten by ``kubetrain.runtime.torchtune`` instead).
"""

from __future__ import annotations

from kubetrain.api.access import as_int, as_str, dicts, list_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.core import convert_env_list, runtime_ref
from kubetrain.runtime.framework import RenderError, ValidationContext, reserved_env_error
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, env_field_ref, env_value, upsert_env, upsert_port
from kubetrain.runtime.resources import cpu_count, gpu_count

__all__ = ["RESERVED_ENV", "TORCHTUNE_ENTRYPOINT", "Torch", "new"]

TRAINER_PORT = 29500
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RESERVED_ENV = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
TORCHTUNE_ENTRYPOINT = ["tune", "run"]


def _targets(info: RuntimeInfo) -> list[tuple[str, str]]:
    torch = info.policy("torch") or {}
    injection = torch.get("envInjection")
    pairs: list[tuple[str, str]] = []
    if not isinstance(injection, dict):
        return pairs
    for target in dicts(injection.get("targets")):
        job_name = as_str(target.get("jobName"))
        for c in list_at(target, "containerNames"):
            pairs.append((job_name, as_str(c)))
    return pairs


def _strings(value: object) -> list[str] | None:
    # Admission guarantees []string; keep malformed input from reaching string code.
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _dict_or_none(value: object) -> Obj | None:
    return value if isinstance(value, dict) else None


def _find_target(info: RuntimeInfo, job_name: str, container: str) -> Obj | None:
    ps = info.pod_set(job_name)
    return ps.container(container, init=True) if ps is not None else None


def _missing_target(job_name: str, container: str) -> str:
    return f'envInjection target podSet "{job_name}" container "{container}" not found in runtime template'


class Torch:
    """Active with ``mlPolicy.torch``."""

    name = "torch"

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        if info.policy("torch") is None:
            return []
        errors = [
            FieldError("spec.runtimeRef", _missing_target(j, c))
            for j, c in _targets(info)
            if _find_target(info, j, c) is None
        ]
        trainer = info.trainer
        reserved_error = reserved_env_error(trainer, RESERVED_ENV)
        if reserved_error is not None:
            errors.append(reserved_error)
        if trainer is not None and trainer.get("command") == TORCHTUNE_ENTRYPOINT:
            from kubetrain.runtime.torchtune import validate_torchtune

            ps = info.trainer_pod_set()
            node = ps.container("node") if ps is not None else None
            errors.extend(
                validate_torchtune(
                    runtime_name=runtime_ref(job)[2],
                    trainer=trainer,
                    runtime_resources=_dict_or_none(node.get("resources") if node else None),
                )
            )
        return errors

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if info.policy("torch") is None:
            return
        info.take_num_nodes()
        trainer = info.trainer
        ps = info.trainer_pod_set()

        nproc: int | str = "auto"
        if trainer is not None and trainer.get("numProcPerNode") is not None:
            nproc = as_int(trainer.get("numProcPerNode"), 0)
        resources = info.trainer_resources()
        gpus = gpu_count(resources)
        if nproc == "auto" and gpus == 0:
            nproc = max(1, cpu_count(resources))

        container = info.trainer_container() if trainer is not None else None
        if container is not None and trainer is not None:
            upsert_env(container, *convert_env_list(trainer.get("env")))
        name = info.trainjob_name
        nodes = ps.count if ps is not None else 1

        def pet() -> list[Obj]:
            return [
                env_value("PET_NNODES", str(nodes)),
                env_value("PET_NPROC_PER_NODE", str(nproc)),
                env_field_ref("PET_NODE_RANK", COMPLETION_INDEX),
            ]

        def master() -> list[Obj]:
            return [
                env_value("PET_MASTER_ADDR", f"{name}-node-0-0.{name}"),
                env_value("PET_MASTER_PORT", str(TRAINER_PORT)),
            ]

        if container is not None and trainer is not None:
            upsert_env(container, *pet())
            if trainer.get("command") != TORCHTUNE_ENTRYPOINT:
                upsert_env(container, *master())
            else:
                from kubetrain.runtime.torchtune import torchtune_command

                runtime_command = container.get("command")
                trainer["command"] = torchtune_command(
                    trainjob_name=name,
                    runtime_name=runtime_ref(job)[2],
                    num_nodes=nodes,
                    num_proc_per_node=nproc,
                    gpus=gpus,
                    args=_strings(trainer.get("args")),
                    runtime_command=_strings(runtime_command),
                )
            upsert_port(container, {"containerPort": TRAINER_PORT})

        for job_name, cname in _targets(info):
            target = _find_target(info, job_name, cname)
            if target is None:
                raise RenderError(FieldError("", _missing_target(job_name, cname)))
            upsert_env(target, *pet())
            upsert_env(target, *master())


def new(gates: object, env: object) -> Torch:
    """Always registered."""
    return Torch()
