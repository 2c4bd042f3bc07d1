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

Each module exposes ``new(gates, env) -> plugin | None``. Modules that do not exist yet are
reported in ``Framework.missing`` instead of failing the import of the whole package.
"""

from __future__ import annotations

import importlib

from kubetrain.runtime.config import Environment, FeatureGates

__all__ = ["PLUGIN_ORDER", "load_plugins"]

PLUGIN_ORDER: tuple[str, ...] = (
    "plainml",
    "torch",
    "mpi",
    "jax",
    "xgboost",
    "flux",
    "trainjobstatus",
    "coscheduling",
    "volcano",
    "jobset",
)


def load_plugins(gates: FeatureGates, env: Environment) -> tuple[list[object], list[str]]:
    """Instantiate the registered plugins in order; also return the names whose module is absent."""
    plugins: list[object] = []
    missing: list[str] = []
    for name in PLUGIN_ORDER:
        module_name = f"{__name__}.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only tolerate the plugin module itself being absent, never a broken import inside it.
            if exc.name != module_name:
                raise
            missing.append(name)
            continue
        plugin = module.new(gates, env)
        if plugin is not None:
            plugins.append(plugin)
    return plugins, missing
