"""kubetrain.api: wire types, constants, CRDs, load/dump for the Trainer kinds and JobSet.

Importing this package is cheap: schemas are parsed on first use, YAML is imported on first load
or dump.
"""

from __future__ import annotations

from kubetrain.api.errors import ErrorType, FieldError, LoadError, format_errors
from kubetrain.api.labels import *  # noqa: F403  (re-exported constants, listed in labels.__all__)
from kubetrain.api.labels import __all__ as _labels_all
from kubetrain.api.types import (
    ClusterTrainingRuntime,
    JobSet,
    JobSetSpec,
    Obj,
    TrainingRuntime,
    TrainingRuntimeSpec,
    TrainJob,
    TrainJobSpec,
    TrainJobStatus,
)

__all__ = [
    "ClusterTrainingRuntime",
    "ErrorType",
    "FieldError",
    "JobSet",
    "JobSetSpec",
    "LoadError",
    "Obj",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "format_errors",
    *_labels_all,
]
