"""kubetrain.client: the Python SDK over the Kubernetes API (local daemon by default).

``TrainerClient`` has the official Kubeflow SDK's surface; ``JobClient`` is the lower-level set of
operations the CLI prints. Names load on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kubetrain.client.connection import Connection, connect
    from kubetrain.client.errors import ClientError, NotFoundError
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.optimizer import OptimizerClient
    from kubetrain.client.trainer_client import TrainerClient
    from kubetrain.client.types import (
        ActiveDeadlineSeconds,
        Annotations,
        BuiltinTrainer,
        CustomTrainer,
        CustomTrainerContainer,
        Event,
        HuggingFaceDatasetInitializer,
        HuggingFaceModelInitializer,
        Initializer,
        KubernetesBackendConfig,
        Labels,
        LocalBackendConfig,
        Name,
        Runtime,
        S3DatasetInitializer,
        S3ModelInitializer,
        Step,
        TorchTuneConfig,
        TrainerArgs,
        TrainerCommand,
        TrainJob,
    )

__all__ = [
    "ActiveDeadlineSeconds",
    "Annotations",
    "BuiltinTrainer",
    "ClientError",
    "Connection",
    "CustomTrainer",
    "CustomTrainerContainer",
    "Event",
    "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer",
    "Initializer",
    "JobClient",
    "KubernetesBackendConfig",
    "Labels",
    "LocalBackendConfig",
    "Name",
    "NotFoundError",
    "OptimizerClient",
    "Runtime",
    "S3DatasetInitializer",
    "S3ModelInitializer",
    "Step",
    "TorchTuneConfig",
    "TrainJob",
    "TrainerArgs",
    "TrainerClient",
    "TrainerCommand",
    "connect",
]

# Where each name lives; everything not listed here is in ``types``.
_MODULES = {
    "ClientError": "errors",
    "NotFoundError": "errors",
    "Connection": "connection",
    "connect": "connection",
    "JobClient": "jobs",
    "TrainerClient": "trainer_client",
    # Search space, objective and algorithm types live beside it in ``kubetrain.client.optimizer``.
    "OptimizerClient": "optimizer",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'kubetrain.client' has no attribute {name!r}")
    module = importlib.import_module(f"kubetrain.client.{_MODULES.get(name, 'types')}")
    return getattr(module, name)
