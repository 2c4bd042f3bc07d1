"""Plugin registry: one module per plugin, run in ``PLUGIN_ORDER`` within every phase.

Why this order (upstream's is random, effects were meant to commute; env-var order is the one
place they do not):

- ML-policy plugins first, so framework env vars (PET_*, JAX_*, DMLC_*, OMPI_*) follow the
  runtime's own env; PlainML before XGBoost so ``spec.trainer.env`` precedes DMLC_* exactly as
  Torch orders ``spec.trainer.env`` before PET_*;
- trainjobstatus after them: its KUBEFLOW_TRAINER_* vars come after the framework's;
- gang scheduling (coscheduling, volcano) next: their PodGroups are built after the
  ConfigMaps/Secrets of the ML plugins;
- jobset last: it syncs counts, stamps pod labels/annotations, and its JobSet is the last object,
  so every ConfigMap/Secret a pod mounts is applied before the pods can exist.

Each module exposes ``new(gates, env) -> plugin | None``; the registry below imports them, so a
missing or misspelt plugin is an import error, never a silently absent phase.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.framework import Framework, Plugin
from kubetrain.runtime.plugins import (
    coscheduling,
    flux,
    jax,
    jobset,
    mpi,
    plainml,
    torch,
    trainjobstatus,
    volcano,
    xgboost,
)

__all__ = ["PLUGIN_ORDER", "REGISTRY", "PluginFactory", "framework_for", "load_plugins"]

PluginFactory = Callable[[FeatureGates, Environment], Plugin | None]
"""``new(gates, env)``: the plugin for this configuration, or None where it is switched off."""

REGISTRY: tuple[tuple[str, PluginFactory], ...] = (
    ("plainml", plainml.new),
    ("torch", torch.new),
    ("mpi", mpi.new),
    ("jax", jax.new),
    ("xgboost", xgboost.new),
    ("flux", flux.new),
    ("trainjobstatus", trainjobstatus.new),
    ("coscheduling", coscheduling.new),
    ("volcano", volcano.new),
    ("jobset", jobset.new),
)
PLUGIN_ORDER: tuple[str, ...] = tuple(name for name, _ in REGISTRY)


def load_plugins(gates: FeatureGates, env: Environment) -> list[Plugin]:
    """Instantiate the registered plugins, in ``PLUGIN_ORDER``."""
    return [p for _, new in REGISTRY if (p := new(gates, env)) is not None]


@functools.lru_cache(maxsize=16)
def framework_for(gates: FeatureGates, env: Environment) -> Framework:
    """The registered plugins for these gates and environment, sorted into phases; cached."""
    return Framework(load_plugins(gates, env))
