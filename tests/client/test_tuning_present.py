"""What the dashboard's Experiment page shows of the trials, computed by ``kubetrain.client.tuning``
(the functions ``describe experiment`` and ``get trials`` share)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.client.tuning import objective_series, parameter_rows, trial_details


def _experiment(kind: str, best: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "search", "namespace": "default"},
        "spec": {
            "objective": {
                "type": kind,
                "objectiveMetricName": "loss",
                "metricStrategies": [
                    {"name": "loss", "value": "min" if kind == "minimize" else "max"},
                    {"name": "acc", "value": "latest"},
                ],
            },
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.01", "max": "0.1", "distribution": "logUniform"},
                },
                {
                    "name": "opt",
                    "parameterType": "categorical",
                    "feasibleSpace": {"list": ["sgd", "adam"]},
                },
            ],
        },
        "status": {"currentOptimalTrial": {"bestTrialName": best}} if best else {},
    }


def _trial(name: str, created: str, loss: str | None, state: str = "Succeeded") -> dict[str, Any]:
    metrics = [] if loss is None else [
        {"name": "loss", "min": loss, "max": "9", "latest": "8"},
        {"name": "acc", "min": "0.1", "max": "0.9", "latest": "0.5"},
    ]  # fmt: skip
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"parameterAssignments": [{"name": "lr", "value": "0.05"}]},
        "status": {
            "conditions": [{"type": state, "status": "True"}],
            "observation": {"metrics": metrics},
        },
    }


TRIALS = [
    _trial("t-b", "2026-01-01T00:00:02Z", "0.5"),
    _trial("t-a", "2026-01-01T00:00:01Z", "0.7"),
    _trial("t-c", "2026-01-01T00:00:03Z", None, state="Running"),
    _trial("t-d", "2026-01-01T00:00:04Z", "0.6"),
]


def test_trials_come_in_creation_order_with_their_values_by_each_metrics_strategy() -> None:
    details = trial_details(_experiment("minimize", best="t-b"), TRIALS)
    assert [d["name"] for d in details] == ["t-a", "t-b", "t-c", "t-d"]
    first = details[1]
    assert first["state"] == "Succeeded"
    assert first["parameters"] == {"lr": "0.05"}
    assert first["metrics"] == {"loss": "0.5", "acc": "0.5"}  # loss by min, acc by latest
    assert first["objective"] == 0.5
    assert [d["best"] for d in details] == [False, True, False, False]
    assert details[2]["state"] == "Running" and details[2]["objective"] is None


@pytest.mark.parametrize(
    ("kind", "best_so_far"),
    [
        ("minimize", [0.7, 0.5, 0.5, 0.5]),
        # maximize reads each trial's max (9 for all): the first stays best.
        ("maximize", [9.0, 9.0, 9.0, 9.0]),
    ],
    ids=["minimizing, the line steps down at a lower loss", "maximizing reads the max"],
)
def test_the_best_so_far_follows_the_objectives_direction(
    kind: str, best_so_far: list[float]
) -> None:
    experiment = _experiment(kind)
    series = objective_series(experiment, trial_details(experiment, TRIALS))
    assert series["best"] == best_so_far
    assert series["objective"][2] is None  # a trial without a value is a gap, not a zero


def test_parameters_read_as_describe_prints_them() -> None:
    assert parameter_rows(_experiment("minimize")) == [
        ("lr", "double", "0.01..0.1 logUniform"),
        ("opt", "categorical", "[sgd, adam]"),
    ]
