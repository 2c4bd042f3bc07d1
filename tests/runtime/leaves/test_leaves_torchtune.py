"""TorchTune command rewrite and validation (trainer v2.3.0 pkg/runtime/framework/plugins/torch/torchtune.go), expectations written by hand."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.errors import FieldError
from kubetrain.runtime.torchtune import (
    is_lora,
    is_qlora,
    is_torchtune,
    model_from_runtime_name,
    recipe_and_config,
    runtime_overrides,
    torchtune_command,
    validate_torchtune,
)

LLAMA_COMMAND = [
    "tune",
    "run",
    "--rdzv_endpoint=localhost:29500",
    "full_finetune_distributed",
    "--config",
    "llama3_2/1B_full",
    "dataset=torchtune.datasets.instruct_dataset",
    "dataset.source=parquet",
    "dataset.data_dir=/workspace/dataset/data",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]
LORA = ["model.lora_attn_modules=[q_proj,v_proj]"]
QLORA = [*LORA, "model.quantize_base=True"]


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("torchtune-llama3.2-1b", "llama3_2/1B"),
        ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
        ("torchtune-llama3.3-70b", "llama3_3/70B"),
        ("torch-distributed", ""),
        ("my-torchtune-llama3.2-1b", ""),
    ],
    ids=[
        "llama 1B",
        "qwen 1.5B",
        "llama 70B",
        "two parts give no model",
        "four parts give no model",
    ],
)
def test_model_from_runtime_name(name: str, model: str) -> None:
    assert model_from_runtime_name(name) == model


@pytest.mark.parametrize(
    ("command", "expected"),
    [(["tune", "run"], True), (["tune", "run", "x"], False), (["tune"], False), (None, False)],
    ids=["exactly tune run", "tune run with more", "tune alone", "no command"],
)
def test_is_torchtune(command: list[str] | None, expected: bool) -> None:
    assert is_torchtune(command) is expected


@pytest.mark.parametrize(
    ("args", "lora", "qlora"),
    [
        ([], False, False),
        (LORA, True, False),
        (QLORA, True, True),
        (["model.quantize_base=TRUE"], False, True),
        (["model.quantize_base=false"], False, False),
        (["model.quantize_base"], False, False),
        ([*QLORA, "model.use_dora=true"], True, False),
        ([*QLORA, "model.use_dora=False"], True, True),
    ],
    ids=[
        "no args",
        "lora_attn_modules turns LoRA on",
        "quantize_base=True turns QLoRA on",
        "the value is compared without case",
        "quantize_base=false is not QLoRA (v2.3)",
        "a bare quantize_base key is not QLoRA (v2.3)",
        "DoRA switched on rules QLoRA out",
        "DoRA switched off leaves QLoRA on",
    ],
)
def test_lora_detection(args: list[str], lora: bool, qlora: bool) -> None:
    assert is_lora(args) is lora
    assert is_qlora(args) is qlora


RECIPES: list[tuple[str, int, int | str, int, list[str], tuple[str, str]]] = [
    (
        "one node, one process: full single device",
        1,
        1,
        0,
        [],
        ("full_finetune_single_device", "M_full_single_device"),
    ),
    (
        "one node, one GPU: full single device",
        1,
        "auto",
        1,
        [],
        ("full_finetune_single_device", "M_full_single_device"),
    ),
    (
        "one node, one GPU, LoRA",
        1,
        "auto",
        1,
        LORA,
        ("lora_finetune_single_device", "M_lora_single_device"),
    ),
    (
        "one node, one GPU, QLoRA",
        1,
        "auto",
        1,
        QLORA,
        ("lora_finetune_single_device", "M_qlora_single_device"),
    ),
    (
        "one node, two GPUs: full distributed",
        1,
        "auto",
        2,
        [],
        ("full_finetune_distributed", "M_full"),
    ),
    ("one node, two GPUs, LoRA", 1, "auto", 2, LORA, ("lora_finetune_distributed", "M_lora")),
    ("one node, two GPUs, QLoRA", 1, "auto", 2, QLORA, ("lora_finetune_distributed", "M_qlora")),
    (
        "two nodes: full multinode",
        2,
        "auto",
        8,
        [],
        ("full_finetune_distributed", "M_full_multinode"),
    ),
    ("two nodes ignore LoRA", 2, 1, 1, LORA, ("full_finetune_distributed", "M_full_multinode")),
]


@pytest.mark.parametrize(
    ("nodes", "nproc", "gpus", "args", "expected"),
    [r[1:] for r in RECIPES],
    ids=[r[0] for r in RECIPES],
)
def test_recipe_and_config(
    nodes: int, nproc: int | str, gpus: int, args: list[str], expected: tuple[str, str]
) -> None:
    assert recipe_and_config("M", nodes, nproc, gpus, args) == expected


def test_runtime_overrides_keep_only_the_managed_paths() -> None:
    assert runtime_overrides(LLAMA_COMMAND) == [
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]


@pytest.mark.parametrize(
    ("nodes", "nproc", "gpus", "expected_head"),
    [
        (
            1,
            "auto",
            2,
            [
                "tune",
                "run",
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_2/1B_full",
            ],
        ),
        (
            1,
            "auto",
            1,
            [
                "tune",
                "run",
                "full_finetune_single_device",
                "--config",
                "llama3_2/1B_full_single_device",
            ],
        ),
        (
            1,
            4,
            0,
            [
                "tune",
                "run",
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_2/1B_full",
            ],
        ),
        (
            2,
            1,
            0,
            [
                "tune",
                "run",
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_2/1B_full_multinode",
            ],
        ),
    ],
    ids=[
        "two GPUs on one node rendezvous on node 0",
        "one GPU needs no rendezvous",
        "four CPU processes rendezvous",
        "two nodes rendezvous and go multinode",
    ],
)
def test_torchtune_command(
    nodes: int, nproc: int | str, gpus: int, expected_head: list[str]
) -> None:
    command = torchtune_command(
        trainjob_name="job",
        runtime_name="torchtune-llama3.2-1b",
        num_nodes=nodes,
        num_proc_per_node=nproc,
        gpus=gpus,
        args=["epochs=1"],
        runtime_command=LLAMA_COMMAND,
    )
    assert command == [*expected_head, *runtime_overrides(LLAMA_COMMAND)]


def trainer(**fields: Any) -> dict[str, Any]:
    return {"command": ["tune", "run"], **fields}


GPU2 = {"limits": {"nvidia.com/gpu": 2}}
VALIDATIONS: list[tuple[str, str, dict[str, Any], list[FieldError]]] = [
    ("a shipped runtime with defaults is valid", "torchtune-llama3.2-1b", trainer(), []),
    (
        "an unsupported model is rejected at runtimeRef.name",
        "torchtune-mistral-7b",
        trainer(),
        [
            FieldError(
                "spec.runtimeRef.name",
                "must have a supported pretrained model, invalid model configured: mistral/7B",
            )
        ],
    ),
    (
        "two nodes are rejected for a 1B model",
        "torchtune-llama3.2-1b",
        trainer(numNodes=2),
        [FieldError("spec.trainer.numNodes", "must be 1 for llama3_2/1B model")],
    ),
    ("two nodes are fine for 70B", "torchtune-llama3.3-70b", trainer(numNodes=2), []),
    (
        "LoRA on two nodes is rejected even for 70B (v2.3)",
        "torchtune-llama3.3-70b",
        trainer(numNodes=2, args=LORA),
        [
            FieldError(
                "spec.trainer.numNodes",
                "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            )
        ],
    ),
    (
        "QLoRA is not supported for qwen",
        "torchtune-qwen2.5-1.5b",
        trainer(args=QLORA, resourcesPerNode={"limits": {"nvidia.com/gpu": 1}}),
        [FieldError("spec.runtimeRef.name", "QLoRA is not supported for qwen2_5/1.5B model")],
    ),
    (
        "distributed QLoRA on llama 1B needs one process and one GPU",
        "torchtune-llama3.2-1b",
        trainer(args=QLORA),
        [
            FieldError(
                "spec.trainer.numProcPerNode",
                "must be auto or 1 for llama3_2/1B model when using QLoRA",
            ),
            FieldError(
                "spec.trainer.resourcesPerNode",
                "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA",
            ),
        ],
    ),
    (
        "single-GPU QLoRA on llama 1B is fine",
        "torchtune-llama3.2-1b",
        trainer(args=QLORA, resourcesPerNode={"limits": {"nvidia.com/gpu": 1}}),
        [],
    ),
    (
        "a managed path in args is rejected with its index",
        "torchtune-llama3.2-1b",
        trainer(args=["epochs=1", "output_dir=/tmp/x", "tokenizer.merges_file=/m"]),
        [
            FieldError(
                "spec.trainer.args[1]",
                'must not set immutable config "output_dir" in trainer args; it is managed by the runtime',
            ),
            FieldError(
                "spec.trainer.args[2]",
                'must not set immutable config "tokenizer.merges_file" in trainer args; it is managed by the runtime',
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("runtime", "spec_trainer", "errors"),
    [v[1:] for v in VALIDATIONS],
    ids=[v[0] for v in VALIDATIONS],
)
def test_validate_torchtune(
    runtime: str, spec_trainer: dict[str, Any], errors: list[FieldError]
) -> None:
    assert (
        validate_torchtune(runtime_name=runtime, trainer=spec_trainer, runtime_resources=GPU2)
        == errors
    )
