"""Katib (kubeflow.org/v1beta1) Experiments of TrainJobs, as pure functions.

``experiment``: Katib's webhook defaults and validation, the parsed search space.
``trials``: Trials and their TrainJobs built, judged and counted as Katib's controllers do.
``admission``: the webhooks, for the embedded API server.
The loop that runs them (and Optuna behind Katib's algorithm names) is ``kubetrain.local.katib``.
"""

from __future__ import annotations

from kubetrain.runtime.katib.admission import COLLECTOR_CONTAINER, TRIAL_LABEL, KatibAdmission
from kubetrain.runtime.katib.experiment import (
    ALGORITHMS,
    EXPERIMENT_LABEL,
    KATIB_API_VERSION,
    SearchParameter,
    default_experiment,
    parse_parameters,
    validate_experiment,
)

__all__ = [
    "ALGORITHMS",
    "COLLECTOR_CONTAINER",
    "EXPERIMENT_LABEL",
    "KATIB_API_VERSION",
    "TRIAL_LABEL",
    "KatibAdmission",
    "SearchParameter",
    "default_experiment",
    "parse_parameters",
    "validate_experiment",
]
