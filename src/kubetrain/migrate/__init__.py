"""kubetrain.migrate: bring old jobs along (pure; imports only kubetrain.api and kubetrain.runtime).

- ``convert(obj, env_shim=True)`` -> ``Conversion``: a Training Operator v1 job (PyTorchJob, TFJob,
  XGBoostJob, JAXJob, PaddleJob, MPIJob) as a TrainJob (+ a generated TrainingRuntime) and a
  report of every field that did not arrive unchanged. ``MigrateError`` where v2 cannot express it.
- ``upgrade_check(objs)`` -> findings for TrainJobs and runtimes written for Trainer v2.0-v2.2;
  ``upgrade_fix(objs)`` -> the v2.3 form.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetrain.migrate.conversion import Conversion, convert
    from kubetrain.migrate.kinds import is_v1_job
    from kubetrain.migrate.report import Category, Finding, MigrateError, ReportItem, Severity
    from kubetrain.migrate.upgrade import is_trainer_object, upgrade_check, upgrade_fix

__all__ = [
    "Category",
    "Conversion",
    "Finding",
    "MigrateError",
    "ReportItem",
    "Severity",
    "convert",
    "is_trainer_object",
    "is_v1_job",
    "upgrade_check",
    "upgrade_fix",
]

_WHERE = {
    "Conversion": "conversion",
    "convert": "conversion",
    "is_v1_job": "kinds",
    "Category": "report",
    "Finding": "report",
    "MigrateError": "report",
    "ReportItem": "report",
    "Severity": "report",
    "is_trainer_object": "upgrade",
    "upgrade_check": "upgrade",
    "upgrade_fix": "upgrade",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
