"""Katib's ``medianstop`` early stopping, as pure functions.

Rule: once ``min_trials_required`` trials have succeeded, the mean over them of the average of
each one's first ``start_step`` objective values (Katib calls it a median; it is a mean).
Enforcement: at a trial's ``start_step``-th objective report, the best value so far is compared
with the rule (``greater`` than it for minimize, ``less`` for maximize, stops the trial).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api.access import list_at, obj_at

__all__ = ["median_stop_rule", "should_stop"]


def _settings(experiment: Mapping[str, Any]) -> tuple[int, int] | None:
    spec = obj_at(experiment, "spec", "earlyStopping")
    if spec.get("algorithmName") != "medianstop":
        return None
    values = {s["name"]: s.get("value") for s in list_at(spec, "algorithmSettings")}
    return int(float(values.get("min_trials_required", 3))), int(float(values.get("start_step", 4)))


def median_stop_rule(
    experiment: Mapping[str, Any], histories: Sequence[Sequence[float]]
) -> list[dict[str, Any]]:
    """``earlyStoppingRules`` for new trials, from the objective values of succeeded trials
    (each in report order); empty until enough trials have succeeded."""
    settings = _settings(experiment)
    if settings is None:
        return []
    min_trials, start_step = settings
    firsts = [h[:start_step] for h in histories if h]
    if len(firsts) < min_trials:
        return []
    value = sum(sum(f) / len(f) for f in firsts) / len(firsts)
    objective = obj_at(experiment, "spec", "objective")
    maximize = objective.get("type") == "maximize"
    return [
        {
            "name": objective.get("objectiveMetricName"),
            "value": str(value),
            "comparison": "less" if maximize else "greater",
            "startStep": start_step,
        }
    ]


def should_stop(
    rules: Sequence[Mapping[str, Any]], values: Sequence[float], maximize: bool
) -> bool:
    """Whether a trial's objective values so far break a rule at its start step."""
    for rule in rules:
        step = int(rule.get("startStep") or 1)
        if len(values) < step:
            continue
        best = max(values[:step]) if maximize else min(values[:step])
        limit = float(rule["value"])
        if (rule.get("comparison") == "less" and best < limit) or (
            rule.get("comparison") == "greater" and best > limit
        ):
            return True
    return False
