"""``OptimizerClient``: the official SDK's hyperparameter search surface over kubetrain's client.

It creates the same Katib ``Experiment`` as ``kubeflow.optimizer.OptimizerClient`` (so an
Experiment made here runs on Katib with kubetrain's TrainJobs as well as on the local engine)
and reads it back the same way, with the official client's rough edges fixed:

- parameters reach the function typed (``float`` for ``uniform``/``loguniform``, ``int`` for
  ``Search.int_uniform``), not as strings, and ``Trial.parameters`` are typed too;
- ``wait_for_job_status`` raises as soon as the search fails, with Katib's reason;
- an Experiment the official parser refuses (TPE, ints, ...) does not break ``list_jobs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.access import dicts, list_at, obj_at
from kubetrain.client import types as T
from kubetrain.client.errors import NotFoundError
from kubetrain.client.resources import EXPERIMENT, TRIAL
from kubetrain.client.trainer_client import TrainerClient, generated_name
from kubetrain.client.view import parse_time

__all__ = [
    "GridSearch",
    "Metric",
    "Objective",
    "OptimizationJob",
    "OptimizerClient",
    "RandomSearch",
    "Result",
    "Search",
    "TrainJobTemplate",
    "Trial",
    "TrialConfig",
    "TuningAlgorithm",
]

STATUSES = frozenset({"Created", "Running", "Complete", "Failed"})


class Search:
    """Search-space entries (Katib ``ParameterSpec``s)."""

    @staticmethod
    def uniform(min: float, max: float) -> dict[str, Any]:
        return {
            "parameterType": "double",
            "feasibleSpace": {"min": str(min), "max": str(max), "distribution": "uniform"},
        }

    @staticmethod
    def loguniform(min: float, max: float) -> dict[str, Any]:
        return {
            "parameterType": "double",
            "feasibleSpace": {"min": str(min), "max": str(max), "distribution": "logUniform"},
        }

    @staticmethod
    def int_uniform(min: int, max: int, step: int = 1) -> dict[str, Any]:
        return {
            "parameterType": "int",
            "feasibleSpace": {
                "min": str(min),
                "max": str(max),
                "step": str(step),
                "distribution": "uniform",
            },
        }

    @staticmethod
    def choice(values: list[Any]) -> dict[str, Any]:
        return {"parameterType": "categorical", "feasibleSpace": {"list": [str(v) for v in values]}}


@dataclass
class Objective:
    metric: str = "loss"
    direction: str = "minimize"


@dataclass
class TrialConfig:
    num_trials: int = 10
    parallel_trials: int = 1
    max_failed_trials: int | None = None


@dataclass
class TuningAlgorithm:
    """Any of Katib's algorithm names the local engine serves, with its settings."""

    name: str = "random"
    settings: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"algorithmName": self.name}
        if self.settings:
            out["algorithmSettings"] = [
                {"name": k, "value": str(v)} for k, v in self.settings.items()
            ]
        return out


def RandomSearch(random_state: int | None = None) -> TuningAlgorithm:
    return TuningAlgorithm("random", {} if random_state is None else {"random_state": random_state})


def GridSearch() -> TuningAlgorithm:
    return TuningAlgorithm("grid")


@dataclass
class TrainJobTemplate:
    trainer: T.CustomTrainer
    runtime: str | T.Runtime | None = None
    initializer: T.Initializer | None = None


@dataclass
class Metric:
    name: str
    min: str
    max: str
    latest: str


@dataclass
class Trial:
    name: str
    parameters: dict[str, Any]
    status: str
    metrics: list[Metric] = field(default_factory=list)


@dataclass
class Result:
    parameters: dict[str, Any]
    metrics: list[Metric]


@dataclass
class OptimizationJob:
    name: str
    algorithm: str
    objectives: list[Objective]
    trials: list[Trial]
    creation_timestamp: datetime | None
    status: str
    message: str = ""


def _placeholder(key: str) -> str:
    """A plain string literal standing for a parameter in the function call until the command is
    built; then swapped for Katib's ``${trialParameters.KEY}`` (see ``_with_parameters``)."""
    return f"__kubetrain_trial_parameter_{key}__"


def _with_parameters(command: list[str], search_space: dict[str, dict[str, Any]]) -> list[str]:
    """The function command with each placeholder argument turned into Katib's substitution,
    converted back to a number for double and int parameters. Done after the command is built,
    which escapes every ``$`` of the source (Kubernetes' ``$(VAR)`` expansion) but must leave
    Katib's own ``${...}`` for its controller to fill in."""
    out = []
    for part in command:
        for key, parameter in search_space.items():
            convert = {"double": "float", "int": "int"}.get(str(parameter.get("parameterType")))
            katib = f"'${{trialParameters.{key}}}'"
            part = part.replace(
                repr(_placeholder(key)), f"{convert}({katib})" if convert else katib
            )
        out.append(part)
    return out


def _typed(spec: dict[str, Any], value: str) -> Any:
    kind = spec.get("parameterType")
    try:
        if kind == "double":
            return float(value)
        if kind == "int":
            return int(float(value))
    except ValueError:
        return value
    return value


def _metrics(observation: dict[str, Any] | None) -> list[Metric]:
    out = []
    for m in dicts(obj_at(observation).get("metrics")):
        if all(k in m for k in ("name", "min", "max", "latest")):
            out.append(Metric(str(m["name"]), str(m["min"]), str(m["max"]), str(m["latest"])))
    return out


def experiment_state(experiment: dict[str, Any]) -> tuple[str, str]:
    """(Created | Running | Complete | Failed, the last condition's message), as the SDK reads it."""
    conditions = dicts(obj_at(experiment, "status").get("conditions"))
    for c in reversed(conditions):
        if c.get("status") == "True" and c.get("type") == "Succeeded":
            return "Complete", str(c.get("message") or "")
        if c.get("status") == "True" and c.get("type") == "Failed":
            return "Failed", str(c.get("message") or "")
    return ("Running" if conditions else "Created"), ""


def trial_status(trial: dict[str, Any]) -> str:
    from kubetrain.runtime.katib.trials import trial_state

    return trial_state(trial)


class OptimizerClient:
    """Run and read hyperparameter searches (Katib Experiments of TrainJobs)."""

    def __init__(
        self, backend_config: T.LocalBackendConfig | T.KubernetesBackendConfig | None = None
    ) -> None:
        self._trainer = TrainerClient(backend_config)
        self._jobs = self._trainer._jobs

    def close(self) -> None:
        self._trainer.close()

    def __enter__(self) -> OptimizerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def experiment_body(
        self,
        trial_template: TrainJobTemplate,
        *,
        search_space: dict[str, dict[str, Any]],
        trial_config: TrialConfig | None = None,
        objectives: list[Objective] | None = None,
        algorithm: TuningAlgorithm | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """The Experiment ``optimize`` creates."""
        if not search_space:
            raise ValueError("Search space must be set.")
        config = trial_config or TrialConfig()
        objectives = objectives or [Objective()]
        trainer = trial_template.trainer
        args = dict(trainer.func_args or {})
        args.update({key: _placeholder(key) for key in search_space})
        typed = T.CustomTrainer(**{**trainer.__dict__, "func_args": args})
        job = self._trainer.trainjob_body(trial_template.runtime, trial_template.initializer, typed)
        job.pop("metadata", None)
        job_trainer = job["spec"]["trainer"]
        job_trainer["command"] = _with_parameters(job_trainer["command"], search_space)
        objective: dict[str, Any] = {
            "objectiveMetricName": objectives[0].metric,
            "type": objectives[0].direction,
        }
        if len(objectives) > 1:
            objective["additionalMetricNames"] = [o.metric for o in objectives[1:]]
        spec: dict[str, Any] = {
            "algorithm": (algorithm or RandomSearch()).spec(),
            "maxTrialCount": config.num_trials,
            "objective": objective,
            "parallelTrialCount": config.parallel_trials,
            "parameters": [{"name": k, **v} for k, v in search_space.items()],
            "trialTemplate": {
                "primaryContainerName": "node",
                "retain": True,
                "trialParameters": [{"name": k, "reference": k} for k in search_space],
                "trialSpec": job,
            },
        }
        if config.max_failed_trials is not None:
            spec["maxFailedTrialCount"] = config.max_failed_trials
        name = name or generated_name()
        return {
            "apiVersion": EXPERIMENT.api_version,
            "kind": EXPERIMENT.kind,
            "metadata": {"name": name},
            "spec": spec,
        }

    def optimize(
        self,
        trial_template: TrainJobTemplate,
        *,
        search_space: dict[str, dict[str, Any]],
        trial_config: TrialConfig | None = None,
        objectives: list[Objective] | None = None,
        algorithm: TuningAlgorithm | None = None,
    ) -> str:
        """Create the Experiment; its name."""
        body = self.experiment_body(
            trial_template,
            search_space=search_space,
            trial_config=trial_config,
            objectives=objectives,
            algorithm=algorithm,
        )
        return self._jobs.apply_one(body).name

    def _trials(self, name: str) -> list[dict[str, Any]]:
        trials = [
            t
            for t in self._jobs.objects(TRIAL)
            if obj_at(t, "metadata", "labels").get("katib.kubeflow.org/experiment") == name
        ]
        return sorted(
            trials,
            key=lambda t: (t["metadata"].get("creationTimestamp") or "", t["metadata"]["name"]),
        )

    def _to_job(self, experiment: dict[str, Any]) -> OptimizationJob:
        spec = obj_at(experiment, "spec")
        parameters = {p["name"]: p for p in dicts(spec.get("parameters"))}
        trials = [
            Trial(
                name=t["metadata"]["name"],
                parameters={
                    a["name"]: _typed(parameters.get(a["name"], {}), a["value"])
                    for a in dicts(obj_at(t, "spec").get("parameterAssignments"))
                },
                status=trial_status(t),
                metrics=_metrics(obj_at(t, "status").get("observation")),
            )
            for t in self._trials(experiment["metadata"]["name"])
        ]
        objective = obj_at(spec, "objective")
        objectives = [
            Objective(objective.get("objectiveMetricName", ""), objective.get("type", ""))
        ]
        objectives += [
            Objective(m, objective.get("type", ""))
            for m in list_at(objective, "additionalMetricNames")
        ]
        state, message = experiment_state(experiment)
        return OptimizationJob(
            name=experiment["metadata"]["name"],
            algorithm=str(obj_at(spec, "algorithm").get("algorithmName", "")),
            objectives=objectives,
            trials=trials,
            creation_timestamp=parse_time(experiment["metadata"].get("creationTimestamp")),
            status=state,
            message=message,
        )

    def get_job(self, name: str) -> OptimizationJob:
        return self._to_job(self._jobs.get(EXPERIMENT, name))

    def list_jobs(self) -> list[OptimizationJob]:
        return [self._to_job(e) for e in self._jobs.objects(EXPERIMENT)]

    def get_best_results(self, name: str) -> Result | None:
        experiment = self._jobs.get(EXPERIMENT, name)
        best = obj_at(experiment, "status", "currentOptimalTrial")
        if not best.get("bestTrialName"):
            return None
        parameters = {p["name"]: p for p in dicts(obj_at(experiment, "spec").get("parameters"))}
        return Result(
            parameters={
                a["name"]: _typed(parameters.get(a["name"], {}), a["value"])
                for a in dicts(best.get("parameterAssignments"))
            },
            metrics=_metrics(best.get("observation")),
        )

    def wait_for_job_status(
        self,
        name: str,
        status: set[str] | frozenset[str] = frozenset({"Complete"}),
        timeout: float = 3600,
        polling_interval: float = 2,
        callbacks: list[Callable[[OptimizationJob], None]] | None = None,
    ) -> OptimizationJob:
        """Poll until the search reaches one of ``status``; RuntimeError at once if it fails."""
        unknown = set(status) - STATUSES
        if unknown:
            raise ValueError(
                f"unknown status {sorted(unknown)}; expected some of {sorted(STATUSES)}"
            )
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(name)
            for callback in callbacks or ():
                callback(job)
            if job.status in status:
                return job
            if job.status == "Failed":
                raise RuntimeError(f"Experiment {name} is Failed: {job.message}")
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"Experiment {name} did not reach {sorted(status)} within {timeout:g}s (now {job.status})"
                )
            time.sleep(min(polling_interval, max(0.0, deadline - time.monotonic())))

    def get_job_logs(
        self, name: str, trial_name: str | None = None, follow: bool = False
    ) -> Iterator[str]:
        """The node-0 output of a trial (default: the best, else the first)."""
        if trial_name is None:
            best = obj_at(self._jobs.get(EXPERIMENT, name), "status", "currentOptimalTrial").get(
                "bestTrialName"
            )
            trials = self._trials(name)
            trial_name = best or (trials[0]["metadata"]["name"] if trials else None)
        if not trial_name:
            return
        yield from self._trainer.get_job_logs(trial_name, follow=follow)

    def delete_job(self, name: str, wait: bool = True, timeout: float = 60.0) -> None:
        """Delete the Experiment; by default return once its trials' processes are gone."""
        trials = [t["metadata"]["name"] for t in self._trials(name)]
        self._jobs.delete_object(
            {
                "apiVersion": EXPERIMENT.api_version,
                "kind": EXPERIMENT.kind,
                "metadata": {"name": name},
            }
        )
        if not wait:
            return
        deadline = time.monotonic() + timeout
        for trial in trials:
            try:
                self._jobs.wait_deleted(trial, timeout=max(0.0, deadline - time.monotonic()))
            except NotFoundError:
                continue
