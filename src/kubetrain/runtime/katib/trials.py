"""Trials as Katib v0.19.0 makes and judges them, as pure functions.

A Trial and its TrainJob are built from the Experiment and one parameter assignment
(``new_trial``); the TrainJob's conditions decide the Trial's (``next_trial_status``); metric
logs fold into ``observation.metrics`` (``observation``); the Trials decide the Experiment's
status and how many Trials to ask for next (``experiment_status``, ``trials_wanted``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.api.access import list_at, obj_at
from kubetrain.runtime.katib.experiment import (
    DEFAULT_METRICS_FORMAT,
    EXPERIMENT_LABEL,
    KATIB_API_VERSION,
    condition_type,
    restartable,
)

__all__ = [
    "COMPLETED_TYPES",
    "UNAVAILABLE",
    "ExperimentView",
    "MetricLog",
    "TrialState",
    "experiment_status",
    "new_trial",
    "next_trial_status",
    "observation",
    "parse_metric_lines",
    "trial_state",
    "trials_wanted",
]

UNAVAILABLE = "unavailable"
COMPLETED_TYPES = ("Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable")
# Kubernetes' rand.String alphabet (no vowels, no look-alikes): Katib's trial name suffixes.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_META = re.compile(
    r"\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|Labels\[([^\]]+)\]|Annotations\[([^\]]+)\])\}"
)
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))\s+")
_NO_TIME = "0001-01-01T00:00:00Z"


def condition(
    ctype: str, reason: str, message: str, now: str, status: str = "True"
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Katib's setCondition: update the condition of that type in place, else append."""
    for i, old in enumerate(conditions):
        if old.get("type") == new["type"]:
            if old.get("status") == new["status"] and old.get("reason") == new["reason"]:
                return
            if old.get("status") == new["status"]:
                new = {
                    **new,
                    "lastTransitionTime": old.get("lastTransitionTime", new["lastTransitionTime"]),
                }
            conditions[i] = new
            return
    conditions.append(new)


def _true(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in list_at(obj, "status", "conditions"):
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


# --- making a Trial ------------------------------------------------------------------------


def trial_name(experiment: str, rand: Callable[[int], int]) -> str:
    """``<experiment>-<8 chars>``; ``rand(n)`` returns an int in ``[0, n)``."""
    return experiment + "-" + "".join(_ALPHABET[rand(len(_ALPHABET))] for _ in range(8))


def new_trial(
    experiment: Mapping[str, Any], name: str, assignments: Sequence[Mapping[str, str]], now: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Trial (with its Created condition) and its TrainJob, for one assignment.

    The TrainJob is the trialSpec with ``${trialParameters.x}`` replaced as text, as Katib's
    manifest generator does (values arrive in the user's code as strings), named like the Trial
    and controlled by it. The Trial's ownerReference uid is filled in by the caller's create.
    """
    meta = experiment["metadata"]
    spec = experiment["spec"]
    template = spec["trialTemplate"]
    namespace = str(meta.get("namespace") or "default")
    labels = {**obj_at(meta, "labels"), EXPERIMENT_LABEL: meta["name"]}
    trial_spec: dict[str, Any] = {
        "objective": spec["objective"],
        "parameterAssignments": [dict(a) for a in assignments],
        "runSpec": substitute(
            template["trialSpec"],
            list_at(template, "trialParameters"),
            assignments,
            name,
            namespace,
        ),
        "metricsCollector": spec.get("metricsCollectorSpec") or {"collector": {"kind": "StdOut"}},
        "primaryContainerName": template.get("primaryContainerName"),
        "retainRun": bool(template.get("retain")),
    }
    if template.get("primaryPodLabels"):
        trial_spec["primaryPodLabels"] = template["primaryPodLabels"]
    if template.get("successCondition") and template.get("failureCondition"):
        trial_spec["successCondition"] = template["successCondition"]
        trial_spec["failureCondition"] = template["failureCondition"]
    trial = {
        "apiVersion": KATIB_API_VERSION,
        "kind": "Trial",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [_owner(KATIB_API_VERSION, "Experiment", meta)],
        },
        "spec": trial_spec,
        "status": {
            "startTime": now,
            "conditions": [condition("Created", "TrialCreated", "Trial is created", now)],
        },
    }
    job = json.loads(json.dumps(trial_spec["runSpec"]))
    return trial, job


def _owner(api_version: str, kind: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def trainjob_for(trial: Mapping[str, Any]) -> dict[str, Any]:
    """The Trial's run object, owned by the (created) Trial."""
    job: dict[str, Any] = json.loads(json.dumps(trial["spec"]["runSpec"]))
    job["metadata"]["ownerReferences"] = [_owner(KATIB_API_VERSION, "Trial", trial["metadata"])]
    return job


def substitute(
    trial_spec: Mapping[str, Any],
    trial_parameters: Iterable[Mapping[str, Any]],
    assignments: Sequence[Mapping[str, str]],
    name: str,
    namespace: str,
) -> dict[str, Any]:
    """Katib's text substitution over the serialised template, then name and namespace set."""
    values = {str(a["name"]): str(a["value"]) for a in assignments}
    text = json.dumps(trial_spec)

    def meta_value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "Name":
            return name
        if key == "Namespace":
            return namespace
        if key == "Kind":
            return str(trial_spec.get("kind", ""))
        if key == "APIVersion":
            return str(trial_spec.get("apiVersion", ""))
        tmeta = obj_at(trial_spec, "metadata")
        if match.group(2) is not None:
            return str(obj_at(tmeta, "labels").get(match.group(2), ""))
        return str(obj_at(tmeta, "annotations").get(match.group(3), ""))

    for parameter in trial_parameters:
        reference = str(parameter["reference"])
        meta = _META.fullmatch(reference)
        value = meta_value(meta) if meta else values.get(reference)
        if value is None:
            raise ValueError(f"no assignment for trial parameter {parameter['name']}")
        # Escaped as a JSON string's contents: the same text as Katib's for ordinary values,
        # and a quote in a categorical value cannot break the document.
        text = text.replace(
            "${trialParameters." + str(parameter["name"]) + "}", json.dumps(value)[1:-1]
        )
    job: dict[str, Any] = json.loads(text)
    job.setdefault("metadata", {})
    job["metadata"]["name"] = name
    job["metadata"]["namespace"] = namespace
    return job


# --- judging a Trial -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricLog:
    """One reported value: Katib's observation log row."""

    name: str
    value: str
    timestamp: str = _NO_TIME


def parse_metric_lines(
    text: str, names: Sequence[str], formats: Sequence[str] = (), json_lines: bool = False
) -> list[MetricLog]:
    """Katib's TEXT (or JSON) file collector over ``text``, for the metric ``names``.

    TEXT: only lines mentioning a metric name count; each filter's first group is the name and
    the second the value; a leading RFC 3339 time stamps the line. JSON: one object a line,
    string values, an optional ``timestamp`` key.
    """
    logs: list[MetricLog] = []
    wanted = set(names)
    patterns = [re.compile(f) for f in (formats or [DEFAULT_METRICS_FORMAT])]
    for raw in text.splitlines():
        line = raw.strip()
        if json_lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            stamp = str(row.get("timestamp") or _NO_TIME)
            logs += [MetricLog(k, str(v), stamp) for k, v in row.items() if k in wanted]
            continue
        if not any(n in line for n in wanted):
            continue
        stamp = _NO_TIME
        found = _TIMESTAMP.match(line)
        if found:
            stamp, line = found.group(1), line[found.end() :]
        for pattern in patterns:
            for match in pattern.finditer(line):
                key, value = match.group(1).strip(), match.group(2).strip()
                if key in wanted and value:
                    logs.append(MetricLog(key, value, stamp))
    return logs


def observation(
    logs: Sequence[MetricLog], strategies: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """``observation`` from metric logs, as Katib's trial controller folds them.

    One entry per metric strategy: min and max over the values that parse as numbers, latest
    the newest by timestamp (a later log wins a tie); ``unavailable`` where nothing parsed.
    """
    metrics = []
    for strategy in strategies:
        name = strategy["name"]
        entry = {"name": name, "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}
        low = high = None
        latest: MetricLog | None = None
        for log in logs:
            if log.name != name:
                continue
            if latest is None or log.timestamp >= latest.timestamp:
                latest = log
            try:
                value = float(log.value)
            except ValueError:
                continue
            if math.isnan(value):
                continue
            if low is None or value < float(low):
                low = log.value
            if high is None or value > float(high):
                high = log.value
        if latest is not None:
            entry["latest"] = latest.value
        if low is not None and high is not None:
            entry["min"], entry["max"] = low, high
        metrics.append(entry)
    return {"metrics": metrics}


def trial_state(trial: Mapping[str, Any]) -> str:
    """The bucket Katib counts a Trial in (Killed > Failed > Succeeded > EarlyStopped > Running
    > MetricsUnavailable > Pending)."""
    for ctype in ("Killed", "Failed", "Succeeded", "EarlyStopped", "Running", "MetricsUnavailable"):
        if _true(trial, ctype) is not None:
            return ctype
    return "Pending"


TrialState = str


def is_completed(trial: Mapping[str, Any]) -> bool:
    return any(_true(trial, t) is not None for t in COMPLETED_TYPES)


def job_outcome(
    trial: Mapping[str, Any], job: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """("Failed" | "Succeeded" | "Running" | "Missing", the deciding condition) of the run object,
    failure checked first as Katib does."""
    if job is None:
        return "Missing", {}
    spec = obj_at(trial, "spec")
    failure = condition_type(str(spec.get("failureCondition") or "")) or "Failed"
    success = condition_type(str(spec.get("successCondition") or "")) or "Complete"
    found = _true(job, failure)
    if found is not None:
        return "Failed", found
    found = _true(job, success)
    if found is not None:
        return "Succeeded", found
    return "Running", {}


def next_trial_status(
    trial: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    observed: Mapping[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    """The Trial's status after looking at its run object; a completed Trial never changes.

    ``observed``: the observation collected once the job has succeeded (None while unknown).
    A succeeded job whose objective is ``unavailable`` ends MetricsUnavailable (Katib would
    wait forever for a collector that can report nothing more).
    """
    status: dict[str, Any] = json.loads(json.dumps(obj_at(trial, "status")))
    if is_completed(trial):
        return status
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    outcome, cond = job_outcome(trial, job)
    if outcome == "Running":
        set_condition(conditions, condition("Running", "TrialRunning", "Trial is running", now))
        return status
    if outcome == "Missing":
        return status
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    if any(c.get("type") == "Running" for c in conditions):
        set_condition(
            conditions,
            condition("Running", "TrialNotRunning", "Trial is not running", now, "False"),
        )
    if outcome == "Failed":
        set_condition(
            conditions,
            condition(
                "Failed",
                f"TrialFailed. Job reason: {reason}",
                f"Trial has failed. Job message: {message}",
                now,
            ),
        )
        status["completionTime"] = now
        if observed is not None:
            status["observation"] = dict(observed)
        return status
    if observed is None:
        return status
    status["observation"] = dict(observed)
    objective = str(obj_at(trial, "spec", "objective").get("objectiveMetricName"))
    latest = next(
        (m["latest"] for m in list_at(observed, "metrics") if m.get("name") == objective),
        UNAVAILABLE,
    )
    if latest == UNAVAILABLE:
        set_condition(
            conditions,
            condition("MetricsUnavailable", "MetricsUnavailable", "Metrics are not available", now),
        )
    else:
        set_condition(
            conditions,
            condition(
                "Succeeded",
                f"TrialSucceeded. Job reason: {reason}",
                f"Trial has succeeded. Job message: {message}",
                now,
            ),
        )
    status["completionTime"] = now
    return status


# --- the Experiment ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExperimentView:
    """What the Trials say about an Experiment: counts by state and the best so far."""

    total: int
    by_state: Mapping[str, list[str]]

    def count(self, *states: str) -> int:
        return sum(len(self.by_state.get(s, [])) for s in states)

    @property
    def active(self) -> int:
        return self.count("Pending", "Running")

    @property
    def completed(self) -> int:
        return self.count("Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable")


def view(trials: Sequence[Mapping[str, Any]]) -> ExperimentView:
    by_state: dict[str, list[str]] = {}
    for trial in trials:
        by_state.setdefault(trial_state(trial), []).append(str(trial["metadata"]["name"]))
    return ExperimentView(len(trials), by_state)


def _objective_value(trial: Mapping[str, Any], objective: Mapping[str, Any]) -> str:
    name = objective.get("objectiveMetricName")
    strategy = next(
        (s.get("value") for s in list_at(objective, "metricStrategies") if s.get("name") == name),
        "latest",
    )
    for metric in list_at(trial, "status", "observation", "metrics"):
        if metric.get("name") == name:
            value = metric.get(strategy) if strategy in ("min", "max") else metric.get("latest")
            if value in (None, UNAVAILABLE):
                value = metric.get("latest")
            return str(value if value is not None else UNAVAILABLE)
    return UNAVAILABLE


def optimal_trial(
    trials: Sequence[Mapping[str, Any]], objective: Mapping[str, Any]
) -> dict[str, Any] | None:
    """``currentOptimalTrial``: the Trial with the best objective (ties keep the first)."""
    maximize = objective.get("type") == "maximize"
    best: tuple[float, Mapping[str, Any]] | None = None
    for trial in trials:
        value = _objective_value(trial, objective)
        if value == UNAVAILABLE:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        if best is None or (number > best[0] if maximize else number < best[0]):
            best = (number, trial)
    if best is None:
        return None
    trial = best[1]
    return {
        "bestTrialName": trial["metadata"]["name"],
        "parameterAssignments": list_at(trial, "spec", "parameterAssignments"),
        "observation": (obj_at(trial, "status").get("observation")) or {"metrics": []},
    }


def _goal_reached(best: Mapping[str, Any] | None, objective: Mapping[str, Any]) -> bool:
    goal = objective.get("goal")
    if best is None or goal is None:
        return False
    name = objective.get("objectiveMetricName")
    for metric in list_at(best["observation"], "metrics"):
        if metric.get("name") == name:
            try:
                value = float(metric.get("latest"))
            except (TypeError, ValueError):
                return False
            return (
                value >= float(goal)
                if objective.get("type") == "maximize"
                else value <= float(goal)
            )
    return False


def experiment_status(
    experiment: Mapping[str, Any],
    trials: Sequence[Mapping[str, Any]],
    now: str,
    failure: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The Experiment's status from its Trials (Katib's status_util), conditions included.

    ``failure``: (reason, message) when something outside the Trials failed it (the
    Suggestion). Terminal conditions are sticky: a finished Experiment keeps its verdict.
    """
    spec = obj_at(experiment, "spec")
    old: dict[str, Any] = json.loads(json.dumps(obj_at(experiment, "status")))
    conditions: list[dict[str, Any]] = list_at(old, "conditions")
    status: dict[str, Any] = {"startTime": old.get("startTime") or now, "conditions": conditions}
    if not conditions:
        conditions.append(condition("Created", "ExperimentCreated", "Experiment is created", now))
    seen = view(trials)
    lists = {
        "Pending": ("trialsPending", "pendingTrialList"),
        "Running": ("trialsRunning", "runningTrialList"),
        "Succeeded": ("trialsSucceeded", "succeededTrialList"),
        "Failed": ("trialsFailed", "failedTrialList"),
        "Killed": ("trialsKilled", "killedTrialList"),
        "EarlyStopped": ("trialsEarlyStopped", "earlyStoppedTrialList"),
        "MetricsUnavailable": ("trialMetricsUnavailable", "metricsUnavailableTrialList"),
    }
    status["trials"] = seen.total
    for state, (count_key, list_key) in lists.items():
        names = sorted(seen.by_state.get(state, []))
        if names:
            status[count_key] = len(names)
            status[list_key] = names
    best = optimal_trial(trials, obj_at(spec, "objective"))
    status["currentOptimalTrial"] = (
        best
        or old.get("currentOptimalTrial")
        or {"bestTrialName": "", "observation": {"metrics": None}}
    )
    if old.get("completionTime"):
        status["completionTime"] = old["completionTime"]
    if _terminal(conditions):
        if not (restartable(experiment) and seen.completed < int(spec.get("maxTrialCount") or 0)):
            return status
        # maxTrialCount raised on a LongRunning/FromVolume Experiment that ran out of trials:
        # Katib restarts it.
        conditions[:] = [c for c in conditions if c.get("type") not in ("Succeeded", "Running")]
        conditions.append(
            condition("Running", "ExperimentRestarting", "Experiment is restarting", now)
        )
        status.pop("completionTime", None)
    objective = obj_at(spec, "objective")
    max_failed = spec.get("maxFailedTrialCount")
    failed = seen.count("Failed", "MetricsUnavailable")
    if failure is not None:
        _finish(status, "Failed", failure[0], failure[1], now)
    elif _goal_reached(best, objective):
        _finish(
            status,
            "Succeeded",
            "ExperimentGoalReached",
            "Experiment has succeeded because Objective goal has reached",
            now,
        )
    elif max_failed is not None and failed > 0 and failed >= int(max_failed):
        _finish(
            status,
            "Failed",
            "ExperimentFailed",
            "Experiment has failed because max failed count has reached",
            now,
        )
    elif seen.completed >= int(spec.get("maxTrialCount") or 0):
        _finish(
            status,
            "Succeeded",
            "ExperimentMaxTrialsReached",
            "Experiment has succeeded because max trial count has reached",
            now,
        )
    else:
        set_condition(
            conditions, condition("Running", "ExperimentRunning", "Experiment is running", now)
        )
    return status


def _terminal(conditions: Sequence[Mapping[str, Any]]) -> bool:
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions
    )


def _finish(status: dict[str, Any], ctype: str, reason: str, message: str, now: str) -> None:
    conditions: list[dict[str, Any]] = status["conditions"]
    # Katib re-appends Running=False before the verdict, so the verdict is last and wins.
    conditions[:] = [c for c in conditions if c.get("type") != "Running"]
    conditions.append(
        condition("Running", "ExperimentNotRunning", "Experiment is not running", now, "False")
    )
    conditions.append(condition(ctype, reason, message, now))
    status["completionTime"] = now


def is_finished(experiment: Mapping[str, Any]) -> bool:
    return _terminal(list_at(experiment, "status", "conditions"))


def trials_wanted(experiment: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]) -> int:
    """How many new Trials to start now: up to parallelTrialCount active, never past
    maxTrialCount in all (a finished Experiment starts none)."""
    if is_finished(experiment):
        return 0
    spec = obj_at(experiment, "spec")
    seen = view(trials)
    parallel = int(spec.get("parallelTrialCount") or 3)
    room = int(spec.get("maxTrialCount") or 0) - seen.total
    return max(0, min(parallel - seen.active, room))
