"""kubetrain: Kubeflow Trainer v2 in Python.

Importing this package is cheap: it imports neither torch, a Kubernetes client nor a web
framework. ``TrainerClient`` and the SDK types load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__"]

if TYPE_CHECKING:  # pragma: no cover
    pass


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
