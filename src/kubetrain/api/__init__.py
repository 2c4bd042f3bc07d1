"""kubetrain.api: wire types, constants, CRDs, load/dump for the Trainer kinds and JobSet.

Importing this package is cheap: errors and constants load eagerly, everything else on first
attribute access (PEP 562), schemas are compiled on first use and PyYAML is imported on first
load or dump.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kubetrain.api.errors import ErrorType, FieldError, LoadError, format_errors
from kubetrain.api.labels import *  # noqa: F403  (constants; the list is labels.__all__)
from kubetrain.api.labels import __all__ as _labels_all

if TYPE_CHECKING:
    from kubetrain.api.dump import clean, dump_json, dump_yaml
    from kubetrain.api.load import load_files, load_objects, parse_documents
    from kubetrain.api.quantity import (
        Quantity,
        canonical_quantity,
        compare_quantities,
        is_quantity,
        parse_quantity,
        quantity_milli_value,
        quantity_value,
    )
    from kubetrain.api.schema import (
        apply_defaults,
        crd_for,
        crd_manifests,
        drop_nulls,
        prune_unknown,
        schema_errors,
        schema_for,
        served_kinds,
        validate_object,
    )
    from kubetrain.api.types import (
        ClusterTrainingRuntime,
        JobSet,
        JobSetSpec,
        JobSetStatus,
        MLPolicy,
        Obj,
        PodGroupPolicy,
        ReplicatedJob,
        RuntimePatch,
        RuntimeRef,
        Trainer,
        TrainerStatus,
        TrainingRuntime,
        TrainingRuntimeSpec,
        TrainJob,
        TrainJobSpec,
        TrainJobStatus,
    )

# Public name -> the module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    "ClusterTrainingRuntime": "kubetrain.api.types",
    "JobSet": "kubetrain.api.types",
    "JobSetSpec": "kubetrain.api.types",
    "JobSetStatus": "kubetrain.api.types",
    "MLPolicy": "kubetrain.api.types",
    "Obj": "kubetrain.api.types",
    "PodGroupPolicy": "kubetrain.api.types",
    "Quantity": "kubetrain.api.quantity",
    "ReplicatedJob": "kubetrain.api.types",
    "RuntimePatch": "kubetrain.api.types",
    "RuntimeRef": "kubetrain.api.types",
    "TrainJob": "kubetrain.api.types",
    "TrainJobSpec": "kubetrain.api.types",
    "TrainJobStatus": "kubetrain.api.types",
    "Trainer": "kubetrain.api.types",
    "TrainerStatus": "kubetrain.api.types",
    "TrainingRuntime": "kubetrain.api.types",
    "TrainingRuntimeSpec": "kubetrain.api.types",
    "apply_defaults": "kubetrain.api.schema",
    "canonical_quantity": "kubetrain.api.quantity",
    "clean": "kubetrain.api.dump",
    "compare_quantities": "kubetrain.api.quantity",
    "crd_for": "kubetrain.api.schema",
    "crd_manifests": "kubetrain.api.schema",
    "drop_nulls": "kubetrain.api.schema",
    "dump_json": "kubetrain.api.dump",
    "dump_yaml": "kubetrain.api.dump",
    "is_quantity": "kubetrain.api.quantity",
    "load_files": "kubetrain.api.load",
    "load_objects": "kubetrain.api.load",
    "parse_documents": "kubetrain.api.load",
    "parse_quantity": "kubetrain.api.quantity",
    "prune_unknown": "kubetrain.api.schema",
    "quantity_milli_value": "kubetrain.api.quantity",
    "quantity_value": "kubetrain.api.quantity",
    "schema_errors": "kubetrain.api.schema",
    "schema_for": "kubetrain.api.schema",
    "served_kinds": "kubetrain.api.schema",
    "validate_object": "kubetrain.api.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ClusterTrainingRuntime",
    "ErrorType",
    "FieldError",
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "LoadError",
    "MLPolicy",
    "Obj",
    "PodGroupPolicy",
    "Quantity",
    "ReplicatedJob",
    "RuntimePatch",
    "RuntimeRef",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "apply_defaults",
    "canonical_quantity",
    "clean",
    "compare_quantities",
    "crd_for",
    "crd_manifests",
    "drop_nulls",
    "dump_json",
    "dump_yaml",
    "format_errors",
    "is_quantity",
    "load_files",
    "load_objects",
    "parse_documents",
    "parse_quantity",
    "prune_unknown",
    "quantity_milli_value",
    "quantity_value",
    "schema_errors",
    "schema_for",
    "served_kinds",
    "validate_object",
    *_labels_all,
]
