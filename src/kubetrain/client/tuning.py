"""Presenting hyperparameter searches: the rows ``get experiments|trials``, ``describe
experiment`` and ``tune`` print, from the Experiment and Trial objects as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubetrain.client.view import age

__all__ = [
    "EXPERIMENT_HEADERS",
    "TRIAL_HEADERS",
    "describe_experiment",
    "experiment_row",
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
    conditions = (experiment.get("status") or {}).get("conditions") or []
    for c in reversed(conditions):
        if c.get("status") == "True":
            state = {"Succeeded": "Complete", "Failed": "Failed", "Running": "Running"}.get(
                str(c.get("type")), "Created"
            )
            return state, str(c.get("reason") or ""), str(c.get("message") or "")
    return "Created", "", ""


def _objective(observation: dict[str, Any] | None, metric: str, strategy: str) -> str:
    for m in (observation or {}).get("metrics") or []:
        if m.get("name") == metric:
            value = m.get(strategy) if strategy in ("min", "max") else m.get("latest")
            return str(value)
    return ""


def _strategy(experiment: dict[str, Any]) -> tuple[str, str]:
    objective = (experiment.get("spec") or {}).get("objective") or {}
    metric = str(objective.get("objectiveMetricName") or "")
    strategy = next(
        (
            s.get("value")
            for s in objective.get("metricStrategies") or []
            if s.get("name") == metric
        ),
        "latest",
    )
    return metric, str(strategy)


def _best(experiment: dict[str, Any]) -> str:
    best = (experiment.get("status") or {}).get("currentOptimalTrial") or {}
    if not best.get("bestTrialName"):
        return "-"
    metric, strategy = _strategy(experiment)
    return f"{metric}={_objective(best.get('observation'), metric, strategy)}"


def experiment_row(experiment: dict[str, Any], now: datetime | None = None) -> list[str]:
    status = experiment.get("status") or {}
    spec = experiment.get("spec") or {}
    return [
        str(experiment["metadata"]["name"]),
        _state(experiment)[0],
        str((spec.get("algorithm") or {}).get("algorithmName", "")),
        f"{status.get('trials', 0)}/{spec.get('maxTrialCount', '?')}",
        str(status.get("trialsRunning", 0)),
        str(status.get("trialsSucceeded", 0)),
        str(status.get("trialsFailed", 0) + status.get("trialMetricsUnavailable", 0)),
        _best(experiment),
        age(experiment["metadata"].get("creationTimestamp"), now),
    ]


def trial_rows(experiment: dict[str, Any] | None, trials: list[dict[str, Any]]) -> list[list[str]]:
    """One row per trial; the best one marked with ``*``."""
    metric, strategy = _strategy(experiment or {})
    best = (((experiment or {}).get("status") or {}).get("currentOptimalTrial") or {}).get(
        "bestTrialName"
    )
    rows = []
    for trial in trials:
        from kubetrain.runtime.katib.trials import trial_state

        if experiment is None:
            objective = (trial.get("spec") or {}).get("objective") or {}
            metric = str(objective.get("objectiveMetricName") or "")
        params = ", ".join(
            f"{a['name']}={a['value']}"
            for a in (trial.get("spec") or {}).get("parameterAssignments") or []
        )
        value = _objective((trial.get("status") or {}).get("observation"), metric, strategy)
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


def describe_experiment(experiment: dict[str, Any], trials: list[dict[str, Any]]) -> str:
    from kubetrain.client.present import render_table

    spec = experiment.get("spec") or {}
    status = experiment.get("status") or {}
    state, reason, message = _state(experiment)
    objective = spec.get("objective") or {}
    algorithm = spec.get("algorithm") or {}
    settings = ", ".join(
        f"{s['name']}={s.get('value')}" for s in algorithm.get("algorithmSettings") or []
    )
    lines = [
        f"Name:          {experiment['metadata']['name']}",
        f"Namespace:     {experiment['metadata'].get('namespace', '')}",
        f"State:         {state}" + (f" ({reason})" if reason else ""),
    ]
    if message:
        lines.append(f"Message:       {message}")
    lines += [
        f"Objective:     {objective.get('type')} {objective.get('objectiveMetricName')}"
        + (f" (goal {objective['goal']})" if objective.get("goal") is not None else "")
        + (
            f", also {', '.join(objective['additionalMetricNames'])}"
            if objective.get("additionalMetricNames")
            else ""
        ),
        f"Algorithm:     {algorithm.get('algorithmName')}" + (f" ({settings})" if settings else ""),
        f"Trials:        {status.get('trials', 0)} of {spec.get('maxTrialCount')}, {spec.get('parallelTrialCount')} at a time"
        + (
            f", at most {spec['maxFailedTrialCount']} failed"
            if spec.get("maxFailedTrialCount") is not None
            else ""
        ),
        f"Collector:     {((spec.get('metricsCollectorSpec') or {}).get('collector') or {}).get('kind', 'StdOut')}",
        "Parameters:",
    ]
    for p in spec.get("parameters") or []:
        space = p.get("feasibleSpace") or {}
        where = (
            f"[{', '.join(space['list'])}]"
            if space.get("list")
            else f"{space.get('min')}..{space.get('max')}"
        )
        extra = f" step {space['step']}" if space.get("step") else ""
        lines.append(
            f"  {p['name']}: {p.get('parameterType')} {where}{extra} {space.get('distribution', '')}".rstrip()
        )
    best = status.get("currentOptimalTrial") or {}
    if best.get("bestTrialName"):
        lines.append(f"Best trial:    {best['bestTrialName']} ({_best(experiment)})")
        lines.append(
            "  "
            + ", ".join(f"{a['name']}={a['value']}" for a in best.get("parameterAssignments") or [])
        )
    lines.append("Trials:" if trials else "Trials:  <none>")
    if trials:
        lines += [
            "  " + line
            for line in render_table(TRIAL_HEADERS, trial_rows(experiment, trials)).splitlines()
        ]
    conditions = status.get("conditions") or []
    if conditions:
        rows = [
            [
                str(c.get("type")),
                str(c.get("status")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            ]
            for c in conditions
        ]
        lines.append("Conditions:")
        lines += [
            "  " + line
            for line in render_table(["TYPE", "STATUS", "REASON", "MESSAGE"], rows).splitlines()
        ]
    return "\n".join(lines)
