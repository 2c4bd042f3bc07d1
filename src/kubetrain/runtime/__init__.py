"""kubetrain.runtime: the pure core. TrainJob + runtime -> upstream's objects, errors and status.

Public entry points (imported lazily, so ``import kubetrain.runtime`` stays cheap):

- ``validate_trainjob``, ``validate_runtime`` -> ``Validation(errors, warnings)``
- ``render`` -> ``Plan(objects, warnings, trainjob_status, ...)``
- ``derive_status``, ``derive`` -> TrainJob status after a reconcile
- ``FeatureGates``, ``Environment``, ``Existing``, ``JobState``, ``RenderError``
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Eager on purpose: the submodule ``render`` and the function ``render`` share a name, and a lazy
# import would leave the package attribute bound to the module. This pulls in only the core
# (PyYAML included), never a Kubernetes client.
from kubetrain.runtime.render import Plan, render

if TYPE_CHECKING:
    from kubetrain.runtime.config import Environment, FeatureGateError, FeatureGates
    from kubetrain.runtime.framework import Existing, RenderError
    from kubetrain.runtime.status import JobState, StatusUpdate, derive, derive_status, job_state
    from kubetrain.runtime.validate import Validation, validate_runtime, validate_trainjob

__all__ = [
    "Environment",
    "Existing",
    "FeatureGateError",
    "FeatureGates",
    "JobState",
    "Plan",
    "RenderError",
    "StatusUpdate",
    "Validation",
    "derive",
    "derive_status",
    "job_state",
    "render",
    "validate_runtime",
    "validate_trainjob",
]

_WHERE = {
    "Environment": "config",
    "FeatureGateError": "config",
    "FeatureGates": "config",
    "Existing": "framework",
    "RenderError": "framework",
    "JobState": "status",
    "StatusUpdate": "status",
    "derive": "status",
    "derive_status": "status",
    "job_state": "status",
    "Validation": "validate",
    "validate_runtime": "validate",
    "validate_trainjob": "validate",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
