"""Suggestions: Optuna behind Katib's algorithm names, one study per Experiment.

Like Katib's suggestion services, a ``Suggester`` is stateful: it keeps its study in memory and
is told about every finished Trial on each call. After a daemon restart a fresh study is fed
the finished Trials it never asked for (``add_trial``), so the search resumes where it was.

| Katib name | here | Katib's service |
|---|---|---|
| random | ``RandomSampler`` | hyperopt ``rand`` |
| grid | ``GridSampler`` over Katib's grid | optuna ``GridSampler`` |
| tpe | ``TPESampler`` | hyperopt ``tpe`` |
| multivariate-tpe | ``TPESampler(multivariate=True, constant_liar=True)`` | the same |
| cmaes | ``CmaEsSampler`` | goptuna CMA-ES |
| bayesianoptimization | ``GPSampler`` (Gaussian process, expected improvement) | scikit-optimize ``gp`` |

Seeds: ``random_state`` seeds the sampler; the same Experiment then gets the same points (not
Katib's points: different libraries draw differently).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.runtime.katib.experiment import SearchParameter, parse_parameters
from kubetrain.runtime.katib.trials import UNAVAILABLE, trial_state

__all__ = ["Suggester", "SuggestionError"]

log = logging.getLogger(__name__)


class SuggestionError(Exception):
    """The algorithm cannot serve this Experiment (Katib's ValidateAlgorithmSettings failing)."""


def _settings(experiment: Mapping[str, Any]) -> dict[str, str]:
    settings = dicts(obj_at(experiment, "spec", "algorithm").get("algorithmSettings"))
    return {str(s["name"]): str(s.get("value")) for s in settings}


def _int(settings: Mapping[str, str], key: str) -> int | None:
    return int(float(settings[key])) if key in settings else None


class Suggester:
    """Asks Optuna for parameter assignments for one Experiment."""

    def __init__(self, experiment: Mapping[str, Any]) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        spec = obj_at(experiment, "spec")
        self.algorithm = str(obj_at(spec, "algorithm").get("algorithmName"))
        self.parameters = parse_parameters(experiment)
        self.objective = obj_at(spec, "objective")
        self._max_trials = int(spec.get("maxTrialCount") or 0)
        settings = _settings(experiment)
        self._grid: list[dict[str, str]] | None = None
        self.distributions = self._distributions()
        sampler = self._sampler(settings)
        maximize = self.objective.get("type") == "maximize"
        self._study = optuna.create_study(
            direction="maximize" if maximize else "minimize", sampler=sampler
        )
        self._numbers: dict[str, int] = {}  # Trial name -> the Optuna trial that proposed it
        self._pending: list[int] = []  # asked, not yet bound to a Trial name
        self._done: set[str] = set()
        self._asked = 0

    def _distributions(self) -> dict[str, Any]:
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.choices:
                out[p.name] = CategoricalDistribution(p.choices)
            elif p.type == "int":
                out[p.name] = IntDistribution(
                    int(p.low), int(p.high), log=p.log, step=int(p.step or 1)
                )
            elif p.log:
                out[p.name] = FloatDistribution(max(1e-10, p.low), p.high, log=True)
            else:
                out[p.name] = FloatDistribution(p.low, p.high, step=p.step)
        return out

    def _sampler(self, settings: Mapping[str, str]) -> Any:
        import optuna

        seed = _int(settings, "random_state")
        name = self.algorithm
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "grid":
            return self._grid_sampler(seed)
        if name in ("tpe", "multivariate-tpe"):
            kwargs: dict[str, Any] = {"seed": seed, "constant_liar": True}
            startup = _int(settings, "n_startup_trials")
            if startup is not None:
                kwargs["n_startup_trials"] = startup
            candidates = _int(settings, "n_ei_candidates") or _int(settings, "n_EI_candidates")
            if candidates is not None:
                kwargs["n_ei_candidates"] = candidates
            if "prior_weight" in settings:
                kwargs["prior_weight"] = float(settings["prior_weight"])
            if "gamma" in settings:
                fraction = float(settings["gamma"])
                if not 0 < fraction <= 1:
                    raise SuggestionError(f"gamma should be in the range of (0, 1], got {fraction}")
                kwargs["gamma"] = lambda n: min(math.ceil(fraction * n), 25)
            return optuna.samplers.TPESampler(multivariate=name == "multivariate-tpe", **kwargs)
        if name == "cmaes":
            continuous = [p for p in self.parameters if not p.choices]
            if len(continuous) < 2 or len(continuous) != len(self.parameters):
                raise SuggestionError(
                    "CMA-ES only supports two or more dimensional continuous search space"
                )
            sigma = float(settings["sigma"]) if "sigma" in settings else None
            if settings.get("restart_strategy", "none") not in ("none", ""):
                raise SuggestionError(
                    "restart_strategy: kubetrain's CMA-ES (Optuna) does not restart; remove it"
                )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return optuna.samplers.CmaEsSampler(seed=seed, sigma0=sigma)
        if name == "bayesianoptimization":
            estimator = settings.get("base_estimator", "GP")
            if estimator != "GP":
                raise SuggestionError(
                    f"base_estimator {estimator}: kubetrain's Bayesian optimisation (Optuna's "
                    "GPSampler) is a Gaussian process only"
                )
            startup = _int(settings, "n_initial_points")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup or 10)
        raise SuggestionError(f"unknown algorithm name {name}")

    def _grid_sampler(self, seed: int | None) -> Any:
        import optuna
        from optuna.distributions import CategoricalDistribution

        for p in self.parameters:
            if p.type == "double" and p.step is None:
                raise SuggestionError(
                    f"Param {p.name} step is nil; For discrete search space, all parameters "
                    "must include step"
                )
        space = {p.name: p.grid() for p in self.parameters}
        combinations = math.prod(len(v) for v in space.values())
        if self._max_trials > combinations:
            raise SuggestionError(
                f"Max Trial Count: {self._max_trials} > all possible search space "
                f"combinations: {combinations}"
            )
        # Grid points are Katib's strings (np.arange values for doubles), asked as categories.
        self.distributions = {k: CategoricalDistribution(v) for k, v in space.items()}
        self._grid = [{}]
        return optuna.samplers.GridSampler(space, seed=seed)

    def bind(self, trial_name: str) -> None:
        """Name the oldest unnamed suggestion: the Trial created for it."""
        if self._pending:
            self._numbers[trial_name] = self._pending.pop(0)

    def discard_pending(self) -> None:
        """Give up the suggestions no Trial was created for (a failed create): they count as
        failed Optuna trials, so a later tell never lands on the wrong parameters."""
        import optuna

        for number in self._pending:
            with contextlib.suppress(RuntimeError, ValueError):
                self._study.tell(number, state=optuna.trial.TrialState.FAIL)
        self._pending.clear()

    def suggest(
        self, trials: Sequence[Mapping[str, Any]], count: int
    ) -> list[list[dict[str, str]]]:
        """``count`` new assignments (fewer when a grid is exhausted), after telling the study
        every finished Trial."""
        self._tell(trials)
        out: list[list[dict[str, str]]] = []
        for _ in range(count):
            if self._grid is not None and self._asked >= math.prod(
                len(d.choices) for d in self.distributions.values()
            ):
                break
            trial = self._study.ask(fixed_distributions=self.distributions)
            self._asked += 1
            self._pending.append(trial.number)
            out.append(
                [{"name": p.name, "value": _text(p, trial.params[p.name])} for p in self.parameters]
            )
        return out

    def _tell(self, trials: Sequence[Mapping[str, Any]]) -> None:
        import optuna

        for trial in trials:
            name = str(trial["metadata"]["name"])
            if name in self._done:
                continue
            state = trial_state(trial)
            if state not in ("Succeeded", "EarlyStopped", "Failed", "MetricsUnavailable", "Killed"):
                continue
            self._done.add(name)
            value = objective_value(trial, self.objective)
            number = self._numbers.get(name)
            ok = state in ("Succeeded", "EarlyStopped") and value is not None
            if number is not None:
                try:
                    if ok:
                        self._study.tell(number, value)
                    else:
                        self._study.tell(number, state=optuna.trial.TrialState.FAIL)
                except RuntimeError:
                    # GridSampler stops the study on the tell that completes the grid.
                    pass
                continue
            if not ok:
                continue
            params = _params(trial, self.parameters, self.distributions)
            if params is None:
                continue
            try:
                self._study.add_trial(
                    optuna.trial.create_trial(
                        params=params, distributions=self.distributions, value=value
                    )
                )
            except ValueError:  # outside today's search space: not evidence for it
                continue
            if self._grid is not None:
                self._asked += 1


def _text(parameter: SearchParameter, value: Any) -> str:
    if parameter.type == "int":
        return str(int(value))
    return str(value)


def _params(
    trial: Mapping[str, Any],
    parameters: Sequence[SearchParameter],
    distributions: Mapping[str, Any],
) -> dict[str, Any] | None:
    from optuna.distributions import CategoricalDistribution

    given = {
        a["name"]: a["value"] for a in dicts(obj_at(trial, "spec").get("parameterAssignments"))
    }
    out: dict[str, Any] = {}
    for p in parameters:
        if p.name not in given:
            return None
        raw = str(given[p.name])
        dist = distributions[p.name]
        try:
            if isinstance(dist, CategoricalDistribution):
                if raw not in dist.choices:
                    return None
                out[p.name] = raw
            elif p.type == "int":
                out[p.name] = int(float(raw))
            else:
                out[p.name] = float(raw)
        except ValueError:
            return None
    return out


def objective_value(trial: Mapping[str, Any], objective: Mapping[str, Any]) -> float | None:
    """The Trial's objective under its metric strategy (latest when min/max is unavailable)."""
    name = objective.get("objectiveMetricName")
    strategy = next(
        (s.get("value") for s in dicts(objective.get("metricStrategies")) if s.get("name") == name),
        "latest",
    )
    for metric in dicts(obj_at(trial, "status", "observation").get("metrics")):
        if metric.get("name") != name:
            continue
        value: Any = metric.get(strategy) if strategy in ("min", "max") else metric.get("latest")
        if value in (None, UNAVAILABLE):
            value = metric.get("latest")
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return None if math.isnan(number) else number
    return None
