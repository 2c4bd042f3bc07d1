"""A small Experiment builder for the Katib tests (one place that knows a valid body)."""

from __future__ import annotations

import copy
from typing import Any

_TRIAL_SPEC: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "spec": {
        "runtimeRef": {"name": "python-nodes", "kind": "TrainingRuntime"},
        "trainer": {
            "command": [
                "python",
                "-c",
                "print('loss=' + str((float('${trialParameters.lr}') - 0.3) ** 2))",
            ],
            "numNodes": 1,
        },
    },
}


def experiment(name: str = "exp", **spec: Any) -> dict[str, Any]:
    """A valid SDK-shaped Experiment (before Katib's defaults); ``spec`` keys replace its own."""
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "algorithm": {
                "algorithmName": "random",
                "algorithmSettings": [{"name": "random_state", "value": "1"}],
            },
            "maxTrialCount": 4,
            "parallelTrialCount": 2,
            "objective": {"objectiveMetricName": "loss", "type": "minimize"},
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.0", "max": "1.0", "distribution": "uniform"},
                }
            ],
            "trialTemplate": {
                "primaryContainerName": "node",
                "retain": True,
                "trialParameters": [{"name": "lr", "reference": "lr"}],
                "trialSpec": copy.deepcopy(_TRIAL_SPEC),
            },
        },
    }
    body["spec"].update(spec)
    return body
