"""The SDK's data types, shaped like the official ``kubeflow.trainer`` ones so code ports as is.

Differences on purpose: ``func_args`` are always keyword arguments; statuses include
``Suspended`` (the official SDK shows a suspended job as ``Created``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any

from kubetrain.initializers.config import MODEL_IGNORE_PATTERNS

__all__ = [
    "ActiveDeadlineSeconds",
    "Annotations",
    "BuiltinTrainer",
    "CustomTrainer",
    "CustomTrainerContainer",
    "Event",
    "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer",
    "Initializer",
    "KubernetesBackendConfig",
    "Labels",
    "LocalBackendConfig",
    "Name",
    "Option",
    "Runtime",
    "RuntimeKind",
    "RuntimeTrainer",
    "S3DatasetInitializer",
    "S3ModelInitializer",
    "Step",
    "TorchTuneConfig",
    "TrainJob",
    "TrainerArgs",
    "TrainerCommand",
    "TrainerType",
]


# --- backends --------------------------------------------------------------------------------


@dataclass
class LocalBackendConfig:
    """This machine's local control plane (started on demand); the default backend."""

    namespace: str | None = None
    home: str | None = None  # KUBETRAIN_HOME; default: $KUBETRAIN_HOME or ~/.kubetrain


@dataclass
class KubernetesBackendConfig:
    """A cluster through a kubeconfig, like the official SDK's config of the same name."""

    namespace: str | None = None
    config_file: str | None = None
    context: str | None = None


# --- trainers --------------------------------------------------------------------------------


@dataclass
class CustomTrainer:
    """Run ``func(**func_args)`` on every node with the runtime's launcher (torchrun, mpirun, python)."""

    func: Callable[..., Any]
    func_args: dict[str, Any] | None = None
    image: str | None = None
    packages_to_install: list[str] | None = None
    pip_index_urls: list[str] = field(default_factory=lambda: ["https://pypi.org/simple"])
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


@dataclass
class CustomTrainerContainer:
    """Run an image's own entrypoint (or TrainerCommand/TrainerArgs) on every node."""

    image: str
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


@dataclass
class TorchTuneConfig:
    """Arguments for a ``tune run`` runtime; ``extra`` holds any further ``key: value`` overrides."""

    dtype: str | None = None
    batch_size: int | None = None
    epochs: int | None = None
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def args(self) -> list[str]:
        values: dict[str, Any] = {
            "dtype": self.dtype,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
        }
        values.update(self.extra)
        return [f"{k}={v}" for k, v in values.items() if v is not None]


@dataclass
class BuiltinTrainer:
    """A runtime's built-in trainer (``trainer.kubeflow.org/framework: torchtune``)."""

    config: TorchTuneConfig


# --- initializers ----------------------------------------------------------------------------


@dataclass
class _InitializerBase:
    """Every optional field that is set becomes an env var named after it in upper case."""

    storage_uri: str

    def spec(self) -> dict[str, Any]:
        env = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "storage_uri" or value is None:
                continue
            text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
            env.append({"name": f.name.upper(), "value": text})
        return {"storageUri": self.storage_uri, "env": env}


@dataclass
class HuggingFaceDatasetInitializer(_InitializerBase):
    ignore_patterns: list[str] | None = None
    access_token: str | None = None


@dataclass
class HuggingFaceModelInitializer(_InitializerBase):
    ignore_patterns: list[str] | None = field(default_factory=lambda: list(MODEL_IGNORE_PATTERNS))
    access_token: str | None = None


@dataclass
class S3DatasetInitializer(_InitializerBase):
    ignore_patterns: list[str] | None = None
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None
    role_arn: str | None = None


@dataclass
class S3ModelInitializer(S3DatasetInitializer):
    # As the official SDK: the model initializers' default ignore patterns travel as env.
    ignore_patterns: list[str] | None = field(default_factory=lambda: list(MODEL_IGNORE_PATTERNS))


@dataclass
class Initializer:
    dataset: _InitializerBase | None = None
    model: _InitializerBase | None = None


# --- options ---------------------------------------------------------------------------------


class Option:
    """Something that edits the TrainJob body before it is sent."""

    def apply(self, job: dict[str, Any]) -> None:
        raise NotImplementedError


@dataclass
class Name(Option):
    name: str

    def apply(self, job: dict[str, Any]) -> None:
        job["metadata"]["name"] = self.name


@dataclass
class Labels(Option):
    labels: dict[str, str]

    def apply(self, job: dict[str, Any]) -> None:
        job["metadata"].setdefault("labels", {}).update(self.labels)


@dataclass
class Annotations(Option):
    annotations: dict[str, str]

    def apply(self, job: dict[str, Any]) -> None:
        job["metadata"].setdefault("annotations", {}).update(self.annotations)


@dataclass
class TrainerCommand(Option):
    command: list[str]

    def apply(self, job: dict[str, Any]) -> None:
        job["spec"].setdefault("trainer", {})["command"] = list(self.command)


@dataclass
class TrainerArgs(Option):
    args: list[str]

    def apply(self, job: dict[str, Any]) -> None:
        job["spec"].setdefault("trainer", {})["args"] = list(self.args)


@dataclass
class ActiveDeadlineSeconds(Option):
    seconds: int

    def apply(self, job: dict[str, Any]) -> None:
        if self.seconds < 1:
            raise ValueError("ActiveDeadlineSeconds must be >= 1")
        job["spec"]["activeDeadlineSeconds"] = self.seconds


# --- what the client returns -------------------------------------------------------------------


class RuntimeKind(StrEnum):
    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"


class TrainerType(StrEnum):
    CUSTOM_TRAINER = "CustomTrainer"
    BUILTIN_TRAINER = "BuiltinTrainer"


@dataclass
class RuntimeTrainer:
    trainer_type: TrainerType
    framework: str
    image: str | None = None
    num_nodes: int = 1
    device: str = "Unknown"
    device_count: str = "Unknown"
    command: tuple[str, ...] = ()


@dataclass
class Runtime:
    name: str
    trainer: RuntimeTrainer
    kind: RuntimeKind = RuntimeKind.CLUSTER_TRAINING_RUNTIME
    pretrained_model: str | None = None


@dataclass
class Step:
    name: str
    status: str | None
    pod_name: str
    device: str = "Unknown"
    device_count: str = "Unknown"


@dataclass
class TrainJob:
    name: str
    runtime: Runtime | None
    steps: list[Step]
    num_nodes: int
    creation_timestamp: datetime | None
    status: str = "Unknown"


@dataclass
class Event:
    involved_object_kind: str
    involved_object_name: str
    message: str
    reason: str
    event_time: datetime | None
