"""kubetrain: Kubeflow Trainer v2 in Python.

Importing this package is cheap: it imports neither torch, a Kubernetes client nor a web
framework. ``TrainerClient`` and the SDK types load on first use::

    from kubetrain import TrainerClient, CustomTrainer
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The SDK surface, the same names as the official ``kubeflow.trainer`` package.
_CLIENT_NAMES = (
    "BuiltinTrainer",
    "CustomTrainer",
    "CustomTrainerContainer",
    "Initializer",
    "KubernetesBackendConfig",
    "LocalBackendConfig",
    "TrainerClient",
)

__all__ = [
    "BuiltinTrainer",
    "CustomTrainer",
    "CustomTrainerContainer",
    "Initializer",
    "KubernetesBackendConfig",
    "LocalBackendConfig",
    "TrainerClient",
    "__version__",
]

if TYPE_CHECKING:  # pragma: no cover
    from kubetrain.client import (
        BuiltinTrainer,
        CustomTrainer,
        CustomTrainerContainer,
        Initializer,
        KubernetesBackendConfig,
        LocalBackendConfig,
        TrainerClient,
    )


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        import kubetrain.client as client

        return getattr(client, name)
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
