"""Presenting hyperparameter searches: the rows ``get experiments|trials``, ``describe
experiment`` and ``tune`` print, from the Experiment and Trial objects as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, dicts, obj_at
from kubetrain.client.view import age

__all__ = [
    "EXPERIMENT_HEADERS",
    "TRIAL_HEADERS",
    "best_text",
    "experiment_row",
    "experiment_state",
    "objective_series",
    "objective_text",
    "parameter_rows",
    "trial_details",
    "trial_rows",
]

EXPERIMENT_HEADERS = [
    "NAME",
    "STATE",
    "ALGORITHM",
    "TRIALS",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "BEST",
    "AGE",
]
TRIAL_HEADERS = ["TRIAL", "STATE", "PARAMETERS", "OBJECTIVE"]


def _state(experiment: dict[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message) from the last condition that is True."""
    conditions = dicts(obj_at(experiment, "status").get("conditions"))
    for c in reversed(conditions):
        if c.get("status") == "True":
            state = {"Succeeded": "Complete", "Failed": "Failed", "Running": "Running"}.get(
                str(c.get("type")), "Created"
            )
            return state, str(c.get("reason") or ""), str(c.get("message") or "")
    return "Created", "", ""


def experiment_state(experiment: dict[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message) as ``get experiments`` shows them."""
    return _state(experiment)


def _objective(observation: dict[str, Any] | None, metric: str, strategy: str) -> str:
    for m in dicts(obj_at(observation).get("metrics")):
        if m.get("name") == metric:
            value = m.get(strategy) if strategy in ("min", "max") else m.get("latest")
            return str(value)
    return ""


def _strategy(experiment: dict[str, Any]) -> tuple[str, str]:
    objective = obj_at(experiment, "spec", "objective")
    metric = str(objective.get("objectiveMetricName") or "")
    strategy = next(
        (
            s.get("value")
            for s in dicts(objective.get("metricStrategies"))
            if s.get("name") == metric
        ),
        "latest",
    )
    return metric, str(strategy)


def best_text(experiment: dict[str, Any]) -> str:
    """``loss=0.12``: the best trial's objective by the experiment's strategy; ``-`` before one."""
    best = obj_at(experiment, "status", "currentOptimalTrial")
    if not best.get("bestTrialName"):
        return "-"
    metric, strategy = _strategy(experiment)
    return f"{metric}={_objective(best.get('observation'), metric, strategy)}"


def experiment_row(experiment: dict[str, Any], now: datetime | None = None) -> list[str]:
    status = obj_at(experiment, "status")
    spec = obj_at(experiment, "spec")
    return [
        str(experiment["metadata"]["name"]),
        _state(experiment)[0],
        str(obj_at(spec, "algorithm").get("algorithmName", "")),
        f"{status.get('trials', 0)}/{spec.get('maxTrialCount', '?')}",
        str(status.get("trialsRunning", 0)),
        str(status.get("trialsSucceeded", 0)),
        str(status.get("trialsFailed", 0) + status.get("trialMetricsUnavailable", 0)),
        best_text(experiment),
        age(experiment["metadata"].get("creationTimestamp"), now),
    ]


def trial_rows(experiment: dict[str, Any] | None, trials: list[dict[str, Any]]) -> list[list[str]]:
    """One row per trial; the best one marked with ``*``."""
    metric, strategy = _strategy(as_dict(experiment))
    best = obj_at(experiment, "status", "currentOptimalTrial").get("bestTrialName")
    rows = []
    for trial in trials:
        from kubetrain.runtime.katib.trials import trial_state

        if experiment is None:
            objective = obj_at(trial, "spec", "objective")
            metric = str(objective.get("objectiveMetricName") or "")
        params = ", ".join(
            f"{a['name']}={a['value']}"
            for a in dicts(obj_at(trial, "spec").get("parameterAssignments"))
        )
        value = _objective(obj_at(trial, "status").get("observation"), metric, strategy)
        name = str(trial["metadata"]["name"])
        rows.append(
            [
                name + (" *" if name == best else ""),
                trial_state(trial),
                params,
                f"{metric}={value}" if value else "-",
            ]
        )
    return rows


def objective_text(experiment: dict[str, Any]) -> str:
    """``minimize loss (goal 0.01), also accuracy``."""
    objective = obj_at(experiment, "spec", "objective")
    return (
        f"{objective.get('type')} {objective.get('objectiveMetricName')}"
        + (f" (goal {objective['goal']})" if objective.get("goal") is not None else "")
        + (
            f", also {', '.join(objective['additionalMetricNames'])}"
            if objective.get("additionalMetricNames")
            else ""
        )
    )


def parameter_rows(experiment: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, type, search space) per parameter: ``("lr", "double", "0.0..1.0 uniform")``."""
    rows = []
    for p in dicts(obj_at(experiment, "spec").get("parameters")):
        space = obj_at(p, "feasibleSpace")
        where = (
            f"[{', '.join(space['list'])}]"
            if space.get("list")
            else f"{space.get('min')}..{space.get('max')}"
        )
        extra = f" step {space['step']}" if space.get("step") else ""
        rows.append(
            (
                str(p["name"]),
                str(p.get("parameterType")),
                f"{where}{extra} {space.get('distribution', '')}".rstrip(),
            )
        )
    return rows


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # NaN: not a point


def trial_details(experiment: dict[str, Any], trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trials in creation order, each with its state, parameter values, every metric (by
    the experiment's strategy for it) and its objective as a number; the same state and
    objective as :func:`trial_rows`."""
    metric, _ = _strategy(experiment)
    strategies = {
        str(s.get("name")): str(s.get("value"))
        for s in dicts(obj_at(experiment, "spec", "objective").get("metricStrategies"))
    }
    best = obj_at(experiment, "status", "currentOptimalTrial").get("bestTrialName")
    ordered = sorted(
        trials,
        key=lambda t: (str(t["metadata"].get("creationTimestamp") or ""), t["metadata"]["name"]),
    )
    out = []
    for trial, row in zip(ordered, trial_rows(experiment, ordered), strict=True):
        observation = obj_at(trial, "status").get("observation")
        metrics = {
            str(m.get("name")): _objective(
                observation, str(m.get("name")), strategies.get(str(m.get("name")), "latest")
            )
            for m in dicts(obj_at(observation).get("metrics"))
        }
        name = str(trial["metadata"]["name"])
        out.append(
            {
                "name": name,
                "state": row[1],
                "parameters": {
                    str(a["name"]): str(a["value"])
                    for a in dicts(obj_at(trial, "spec").get("parameterAssignments"))
                },
                "metrics": metrics,
                "objective": _number(metrics.get(metric, "")),
                "best": name == best,
                "created": trial["metadata"].get("creationTimestamp"),
            }
        )
    return out


def objective_series(
    experiment: dict[str, Any], details: list[dict[str, Any]]
) -> dict[str, list[float | None]]:
    """The objective per trial (in :func:`trial_details` order; None where it has none) and the
    best value so far after each, in the experiment's direction."""
    maximize = obj_at(experiment, "spec", "objective").get("type") == "maximize"
    values: list[float | None] = [d["objective"] for d in details]
    best_so_far: list[float | None] = []
    best: float | None = None
    for value in values:
        if value is not None and (best is None or (value > best if maximize else value < best)):
            best = value
        best_so_far.append(best)
    return {"objective": values, "best": best_so_far}
