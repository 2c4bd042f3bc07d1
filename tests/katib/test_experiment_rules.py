"""Katib's Experiment webhook: defaults and refusals with Katib's words (kubetrain.runtime.katib)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from katib_support import experiment

from kubetrain.api.errors import aggregate_text
from kubetrain.runtime.katib import default_experiment, validate_experiment


def errors_of(body: dict[str, Any]) -> str:
    return aggregate_text(validate_experiment(default_experiment(body)))


def test_the_sdk_body_gets_katibs_defaults() -> None:
    body = default_experiment(
        experiment(
            objective={
                "objectiveMetricName": "loss",
                "type": "minimize",
                "additionalMetricNames": ["accuracy"],
            }
        )
    )
    spec = body["spec"]
    assert spec["resumePolicy"] == "Never"
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
    # Additional metrics follow the objective's direction, as Katib's code (not its comment) says.
    assert spec["objective"]["metricStrategies"] == [
        {"name": "loss", "value": "min"},
        {"name": "accuracy", "value": "min"},
    ]
    template = spec["trialTemplate"]
    assert (
        template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    )
    assert template["failureCondition"] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    assert template["primaryPodLabels"] == {
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    assert validate_experiment(body) == []


def test_parallel_trial_count_defaults_to_three_and_distribution_to_uniform() -> None:
    body = experiment(maxTrialCount=5)
    del body["spec"]["parallelTrialCount"]
    body["spec"]["parameters"] = [
        {"name": "lr", "parameterType": "categorical", "feasibleSpace": {"list": ["a"]}}
    ]
    spec = default_experiment(body)["spec"]
    assert spec["parallelTrialCount"] == 3
    assert spec["parameters"][0]["feasibleSpace"]["distribution"] == "uniform"


def test_a_file_collector_gets_katibs_path() -> None:
    spec = default_experiment(experiment(metricsCollectorSpec={"collector": {"kind": "File"}}))[
        "spec"
    ]
    assert spec["metricsCollectorSpec"]["source"] == {
        "fileSystemPath": {"path": "/var/log/katib/metrics.log", "kind": "File", "format": "TEXT"}
    }


def _with(path: str, value: Any) -> dict[str, Any]:
    body = experiment()
    *parents, last = path.split(".")
    node: Any = body
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return body


REFUSALS = [
    (
        "name starts with a digit",
        _with("metadata.name", "1exp"),
        'metadata.name: Invalid value: "1exp": name must consist of lower case alphanumeric characters',
    ),
    ("name longer than 40", _with("metadata.name", "e" * 41), "must be no more than 40 characters"),
    (
        "maxTrialCount 0",
        _with("spec.maxTrialCount", 0),
        "spec.maxTrialCount: Invalid value: 0: must be greater than 0",
    ),
    (
        "parallel above max",
        _with("spec.parallelTrialCount", 9),
        "spec.parallelTrialCount: Invalid value: 9: should be less than or equal to spec.maxTrialCount",
    ),
    (
        "negative maxFailedTrialCount",
        _with("spec.maxFailedTrialCount", -1),
        "spec.maxFailedTrialCount: Invalid value: -1: should not be less than 0",
    ),
    (
        "objective type",
        _with("spec.objective.type", "up"),
        'spec.objective.type: Invalid value: "up": must be minimize or maximize',
    ),
    (
        "no objective metric",
        _with("spec.objective.objectiveMetricName", None),
        "spec.objective.objectiveMetricName: Required value: must be specified",
    ),
    (
        "hyperband is refused by name",
        _with("spec.algorithm", {"algorithmName": "hyperband"}),
        "unable to get Suggestion config data for algorithm hyperband",
    ),
    (
        "unknown algorithm setting",
        _with(
            "spec.algorithm",
            {"algorithmName": "random", "algorithmSettings": [{"name": "x", "value": "1"}]},
        ),
        "spec.algorithm.algorithmSettings[0].name",
    ),
    (
        "negative random_state",
        _with(
            "spec.algorithm",
            {
                "algorithmName": "random",
                "algorithmSettings": [{"name": "random_state", "value": "-2"}],
            },
        ),
        "random_state must be an integer >= 0",
    ),
    (
        "unknown early stopping",
        _with("spec.earlyStopping", {"algorithmName": "curve"}),
        "unable to get EarlyStopping config data for algorithm curve",
    ),
    (
        "bad resume policy",
        _with("spec.resumePolicy", "Always"),
        'spec.resumePolicy: Invalid value: "Always": invalid ResumePolicyType',
    ),
    (
        "double without max",
        _with(
            "spec.parameters",
            [{"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "1"}}],
        ),
        "feasibleSpace.max or feasibleSpace.min must be specified for parameterType: double",
    ),
    (
        "categorical with min",
        _with(
            "spec.parameters",
            [
                {
                    "name": "lr",
                    "parameterType": "categorical",
                    "feasibleSpace": {"min": "1", "list": ["a"]},
                }
            ],
        ),
        "feasibleSpace .max, .min and .step is not supported for parameterType: categorical",
    ),
    (
        "unknown parameter type",
        _with(
            "spec.parameters",
            [{"name": "lr", "parameterType": "float", "feasibleSpace": {"min": "0", "max": "1"}}],
        ),
        "parameterType: float is not supported",
    ),
    (
        "log range through zero",
        _with(
            "spec.parameters",
            [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0", "max": "1", "distribution": "logUniform"},
                }
            ],
        ),
        "must be greater than 0 for distribution: logUniform",
    ),
    (
        "no parameters",
        _with("spec.parameters", []),
        "spec: Required value: spec.parameters or spec.nasConfig must be specified",
    ),
    (
        "trial parameter not in the template",
        _with(
            "spec.trialTemplate.trialParameters",
            [{"name": "lr", "reference": "lr"}, {"name": "bs", "reference": "lr2"}],
        ),
        "parameter reference lr2 does not exist in spec.parameters",
    ),
    (
        "no primary container",
        _with("spec.trialTemplate.primaryContainerName", None),
        "spec.trialTemplate.primaryContainerName: Required value: must be specified",
    ),
    (
        "template names itself",
        _with("spec.trialTemplate.trialSpec.metadata", {"name": "x"}),
        "metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
    ),
    (
        "placeholder without a trial parameter",
        _with(
            "spec.trialTemplate.trialSpec.spec.trainer.command",
            ["echo", "${trialParameters.lr}", "${trialParameters.momentum}"],
        ),
        "${trialParameters.momentum}",
    ),
    (
        "collector kind",
        _with("spec.metricsCollectorSpec", {"collector": {"kind": "None"}}),
        'spec.metricsCollectorSpec.collector.kind: Invalid value: "None": invalid metrics collector kind: None',
    ),
    (
        "filter with one group",
        _with(
            "spec.metricsCollectorSpec",
            {
                "collector": {"kind": "StdOut"},
                "source": {"filter": {"metricsFormat": ["loss=(\\d+)"]}},
            },
        ),
        "two top subexpressions are required",
    ),
    (
        "a batch Job trial",
        _with(
            "spec.trialTemplate.trialSpec",
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"x": "${trialParameters.lr}"}},
        ),
        "runs TrainJob (trainer.kubeflow.org) trials only",
    ),
]


@pytest.mark.parametrize(("body", "words"), [pytest.param(b, w, id=i) for i, b, w in REFUSALS])
def test_a_bad_experiment_is_refused_with_katibs_words(body: dict[str, Any], words: str) -> None:
    assert words in errors_of(copy.deepcopy(body))


def test_only_the_trial_counts_change_after_creation() -> None:
    old = default_experiment(experiment())
    raised = copy.deepcopy(old)
    raised["spec"]["maxTrialCount"] = 8
    assert validate_experiment(raised, old) == []
    moved = copy.deepcopy(old)
    moved["spec"]["objective"]["type"] = "maximize"
    assert (
        "only spec.parallelTrialCount, spec.maxTrialCount and spec.maxFailedTrialCount are editable"
        in aggregate_text(validate_experiment(moved, old))
    )
