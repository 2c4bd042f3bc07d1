"""The ClusterTrainingRuntimes upstream Trainer v2.3 installs by default (trainer v2.3.0 manifests/base/runtimes/), as data.

Written for kubetrain from the published runtime semantics: images carry the ``v2.3.0`` tag that
upstream's release overlay puts on every ``ghcr.io/kubeflow/trainer/*`` image, and every runtime
carries ``trainer.kubeflow.org/webhook-validation: disabled`` as upstream's v2.3 install does.

``torch-distributed-with-cache`` is *not* a default: upstream ships it only in the data-cache
overlay, and it cannot run without LeaderWorkerSet and a per-namespace ServiceAccount. It is
available from :func:`data_cache_runtimes` for installs that enable the data cache.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import yaml

from kubetrain.runtime.config import OPERATOR_NAMESPACE

__all__ = [
    "DATA_CACHE_RUNTIME_NAMES",
    "DEFAULT_RUNTIME_NAMES",
    "OPERATOR_NAMESPACE",
    "PUBLIC_CONFIG_MAP",
    "TRAINER_RELEASE",
    "data_cache_runtimes",
    "default_runtimes",
    "install_defaults",
    "public_config_map",
]

# The Trainer release whose API and behaviour kubetrain implements; the official SDK reads it.
TRAINER_RELEASE = "v2.3.0"
PUBLIC_CONFIG_MAP = "kubeflow-trainer-public"

Obj = dict[str, Any]

# In the order upstream's reference table lists them; default_runtimes() keeps this order.
DEFAULT_RUNTIME_NAMES = (
    "torch-distributed",
    "deepspeed-distributed",
    "mlx-distributed",
    "jax-distributed",
    "xgboost-distributed",
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-qwen2.5-1.5b",
)
DATA_CACHE_RUNTIME_NAMES = ("torch-distributed-with-cache",)


@functools.cache
def _load(names: tuple[str, ...]) -> tuple[Obj, ...]:
    # Parsed once per process; callers get deep copies, so nobody can edit the shared data.
    package = resources.files(__name__)
    loaded = []
    for name in names:
        obj = yaml.safe_load(package.joinpath(f"{name}.yaml").read_text(encoding="utf-8"))
        if not isinstance(obj, dict) or obj.get("metadata", {}).get("name") != name:
            raise RuntimeError(f"defaults/{name}.yaml does not hold the runtime {name!r}")
        loaded.append(obj)
    return tuple(loaded)


def default_runtimes() -> list[Obj]:
    """Fresh copies of the default ClusterTrainingRuntimes, in :data:`DEFAULT_RUNTIME_NAMES` order."""
    return [copy.deepcopy(obj) for obj in _load(DEFAULT_RUNTIME_NAMES)]


def data_cache_runtimes() -> list[Obj]:
    """Fresh copies of the runtimes upstream installs only with the data cache enabled."""
    return [copy.deepcopy(obj) for obj in _load(DATA_CACHE_RUNTIME_NAMES)]


def public_config_map() -> Obj:
    """The ConfigMap an install publishes for clients: the official SDK reads its version at start."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PUBLIC_CONFIG_MAP, "namespace": OPERATOR_NAMESPACE},
        "data": {"kubeflow_trainer_version": TRAINER_RELEASE},
    }


def install_defaults() -> list[Obj]:
    """Every object an install holds from its first start: the default runtimes and the public ConfigMap."""
    return [*default_runtimes(), public_config_map()]
