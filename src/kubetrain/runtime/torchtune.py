"""TorchTune: the torch plugin's special case for ``spec.trainer.command == ["tune", "run"]`` (trainer v2.3.0 pkg/runtime/framework/plugins/torch/torchtune.go).

The torchtune runtimes ship a complete ``tune run`` command. A TrainJob that asks for ``tune run``
gets that command rebuilt for its shape: the rendezvous endpoint when more than one process
takes part, the recipe and config chosen from the model (read off the runtime's name), the node
count, processes per node, GPUs and LoRA/QLoRA arguments, and the four path settings the runtime
owns copied from the runtime's command. ``spec.trainer.args`` are passed through untouched.

Everything here is a pure function of plain values; the torch plugin supplies them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api.access import list_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.resources import gpu_count

__all__ = [
    "IMMUTABLE_CONFIGS",
    "SUPPORTED_MODELS",
    "TORCHTUNE_ENTRYPOINT",
    "is_lora",
    "is_qlora",
    "is_torchtune",
    "model_from_runtime_name",
    "recipe_and_config",
    "runtime_overrides",
    "torchtune_command",
    "validate_torchtune",
]

Obj = dict[str, Any]

TORCHTUNE_ENTRYPOINT = ("tune", "run")

SUPPORTED_MODELS = frozenset({"llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B"})

# Path settings the runtime's command owns; a TrainJob may not set them in its args.
IMMUTABLE_CONFIGS = (
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
)

_MULTINODE_MODELS = frozenset({"llama3_3/70B"})
_QLORA_SINGLE_GPU_MODELS = frozenset({"llama3_2/1B", "llama3_2/3B"})
_QWEN = "qwen2_5/1.5B"
_TRAINER_PORT = 29500

# Recipes and config suffixes torchtune publishes (config name = "<model><suffix>").
_FULL_SINGLE = ("full_finetune_single_device", "_full_single_device")
_FULL_DISTRIBUTED = ("full_finetune_distributed", "_full")
_FULL_MULTINODE = ("full_finetune_distributed", "_full_multinode")
_LORA_SINGLE = ("lora_finetune_single_device", "_lora_single_device")
_QLORA_SINGLE = ("lora_finetune_single_device", "_qlora_single_device")
_LORA_DISTRIBUTED = ("lora_finetune_distributed", "_lora")
_QLORA_DISTRIBUTED = ("lora_finetune_distributed", "_qlora")


def is_torchtune(command: Sequence[str] | None) -> bool:
    """Whether a TrainJob's ``spec.trainer.command`` selects the torchtune path (exactly ``tune run``)."""
    return command is not None and tuple(command) == TORCHTUNE_ENTRYPOINT


def model_from_runtime_name(runtime_name: str) -> str:
    """``torchtune-llama3.2-1b`` → ``llama3_2/1B``; ``""`` unless the name has exactly three parts."""
    parts = runtime_name.split("-")
    if len(parts) != 3:
        return ""
    return f"{parts[1].replace('.', '_')}/{parts[2].upper()}"


def is_lora(args: Sequence[str] | None) -> bool:
    """LoRA is on when any argument mentions ``model.lora_attn_modules``."""
    return any("model.lora_attn_modules" in arg for arg in args or ())


def _flag_true(arg: str, key_part: str) -> bool:
    key, sep, value = arg.partition("=")
    return bool(sep) and key_part in key and value.strip().lower() == "true"


def is_qlora(args: Sequence[str] | None) -> bool:
    """QLoRA (v2.3): some ``key=value`` argument whose key contains ``model.quantize_base`` is
    ``true`` (any case) and no argument turns ``model.use_dora`` on."""
    args = args or ()
    if any(_flag_true(arg, "model.use_dora") for arg in args):
        return False
    return any(_flag_true(arg, "model.quantize_base") for arg in args)


def recipe_and_config(
    model: str,
    num_nodes: int,
    num_proc_per_node: int | str,
    gpus: int,
    args: Sequence[str] | None,
) -> tuple[str, str]:
    """The recipe and config for a job shape; the rules and their order are upstream's.

    ``num_proc_per_node`` is an ``int`` or the string ``"auto"``.
    """
    single_device = num_nodes == 1 and (
        (isinstance(num_proc_per_node, int) and num_proc_per_node == 1) or gpus == 1
    )
    if single_device:
        if is_qlora(args):
            recipe, suffix = _QLORA_SINGLE
        elif is_lora(args):
            recipe, suffix = _LORA_SINGLE
        else:
            recipe, suffix = _FULL_SINGLE
    elif num_nodes == 1 and is_qlora(args):
        recipe, suffix = _QLORA_DISTRIBUTED
    elif num_nodes == 1 and is_lora(args):
        recipe, suffix = _LORA_DISTRIBUTED
    elif num_nodes > 1:
        recipe, suffix = _FULL_MULTINODE
    else:
        recipe, suffix = _FULL_DISTRIBUTED
    return recipe, f"{model}{suffix}"


def _config_key(arg: str) -> str:
    return arg.split("=", 1)[0]


def runtime_overrides(runtime_command: Sequence[str] | None) -> list[str]:
    """The items of the runtime's ``node`` command that set one of :data:`IMMUTABLE_CONFIGS`."""
    return [arg for arg in runtime_command or () if _config_key(arg) in IMMUTABLE_CONFIGS]


def torchtune_command(
    *,
    trainjob_name: str,
    runtime_name: str,
    num_nodes: int,
    num_proc_per_node: int | str,
    gpus: int,
    args: Sequence[str] | None,
    runtime_command: Sequence[str] | None,
) -> list[str]:
    """The ``node`` container's command for a torchtune TrainJob.

    ``num_nodes`` is the trainer PodSet's count; ``num_proc_per_node`` the value the torch plugin
    settled on (an ``int``, or ``"auto"`` when GPUs are present); ``gpus`` the GPUs per node.
    """
    command = list(TORCHTUNE_ENTRYPOINT)
    multi_process = (
        num_nodes > 1
        or (isinstance(num_proc_per_node, int) and num_proc_per_node > 1)
        or (isinstance(num_proc_per_node, str) and gpus > 1)
    )
    if multi_process:
        # Rendezvous on the first node's stable JobSet hostname, like every other master address.
        command.append(f"--rdzv_endpoint={trainjob_name}-node-0-0.{trainjob_name}:{_TRAINER_PORT}")
    recipe, config = recipe_and_config(
        model_from_runtime_name(runtime_name), num_nodes, num_proc_per_node, gpus, args
    )
    command += [recipe, "--config", config]
    command += runtime_overrides(runtime_command)
    return command


def validate_torchtune(
    *,
    runtime_name: str,
    trainer: Mapping[str, Any],
    runtime_resources: Obj | None = None,
) -> list[FieldError]:
    """The webhook's torchtune checks for a TrainJob whose command is ``tune run``.

    ``trainer`` is ``spec.trainer``; ``runtime_resources`` the runtime's ``node`` container
    resources, used for the GPU count only when the TrainJob sets no ``resourcesPerNode``.
    Node count defaults to 1 and processes per node to ``"auto"`` here, as upstream's webhook does.
    """
    errors: list[FieldError] = []
    model = model_from_runtime_name(runtime_name)
    if model not in SUPPORTED_MODELS:
        errors.append(
            FieldError(
                "spec.runtimeRef.name",
                f"must have a supported pretrained model, invalid model configured: {model}",
            )
        )
    raw_nodes = trainer.get("numNodes")
    num_nodes = raw_nodes if isinstance(raw_nodes, int) else 1
    if num_nodes > 1 and model not in _MULTINODE_MODELS:
        errors.append(FieldError("spec.trainer.numNodes", f"must be 1 for {model} model"))

    raw_nproc = trainer.get("numProcPerNode")
    num_proc_per_node: int | str = raw_nproc if isinstance(raw_nproc, int) else "auto"
    resources = trainer.get("resourcesPerNode")
    if resources is None:
        resources = runtime_resources
    args = list_at(trainer, "args")
    _, config = recipe_and_config(model, num_nodes, num_proc_per_node, gpu_count(resources), args)
    if _QLORA_DISTRIBUTED[1] in config:
        if model == _QWEN:
            errors.append(
                FieldError("spec.runtimeRef.name", f"QLoRA is not supported for {model} model")
            )
        if _QLORA_SINGLE[1] not in config and model in _QLORA_SINGLE_GPU_MODELS:
            errors.append(
                FieldError(
                    "spec.trainer.numProcPerNode",
                    f"must be auto or 1 for {model} model when using QLoRA",
                )
            )
            errors.append(
                FieldError(
                    "spec.trainer.resourcesPerNode",
                    f"must have gpu resource with value 1 for {model} model when using QLoRA",
                )
            )
    if num_nodes > 1 and is_lora(args):
        errors.append(
            FieldError(
                "spec.trainer.numNodes",
                "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            )
        )
    for i, arg in enumerate(args):
        key = _config_key(arg)
        if key in IMMUTABLE_CONFIGS:
            errors.append(
                FieldError(
                    f"spec.trainer.args[{i}]",
                    f'must not set immutable config "{key}" in trainer args; '
                    "it is managed by the runtime",
                )
            )
    return errors
