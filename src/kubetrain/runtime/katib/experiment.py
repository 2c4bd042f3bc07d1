"""Katib's Experiment webhook as pure functions: defaults, validation, and the parsed search space.

The embedded API server calls ``default_experiment`` and ``validate_experiment`` through
``KatibAdmission``; the Experiment controller and kubetrain's ``OptimizerClient`` read the same
``SearchParameter`` values. Messages are Katib v0.19.0's, so a refusal reads the same here as
from Katib's webhook on a cluster.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.errors import FieldError

__all__ = [
    "ALGORITHMS",
    "COLLECTOR_KINDS",
    "DEFAULT_METRICS_FORMAT",
    "EARLY_STOPPING_ALGORITHMS",
    "EXPERIMENT_LABEL",
    "KATIB_API_VERSION",
    "TRAINJOB_FAILURE_CONDITION",
    "TRAINJOB_SUCCESS_CONDITION",
    "SearchParameter",
    "default_experiment",
    "parse_parameters",
    "validate_experiment",
]

KATIB_API_VERSION = "kubeflow.org/v1beta1"
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
TRAINJOB_SUCCESS_CONDITION = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
TRAINJOB_FAILURE_CONDITION = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
# Katib's conditions for a batch/v1 Job template (its webhook's other default pair).
_JOB_SUCCESS_CONDITION = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
_JOB_FAILURE_CONDITION = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
# The StdOut/File TEXT filter Katib's collector uses when the Experiment names none.
DEFAULT_METRICS_FORMAT = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"

# Katib's algorithm names this engine serves with Optuna (kubetrain.local.katib.suggest), and
# the settings each accepts; the rest of Katib's names are refused by name.
ALGORITHMS: Mapping[str, frozenset[str]] = {
    "random": frozenset({"random_state"}),
    "grid": frozenset({"random_state"}),
    "tpe": frozenset({"random_state", "n_startup_trials", "n_ei_candidates", "gamma", "prior_weight", "n_EI_candidates"}),
    "multivariate-tpe": frozenset({"random_state", "n_startup_trials", "n_ei_candidates"}),
    "cmaes": frozenset({"random_state", "sigma", "restart_strategy"}),
    "bayesianoptimization": frozenset({"random_state", "n_initial_points", "base_estimator", "acq_func", "acq_optimizer"}),
}  # fmt: skip
_UNSERVED = {
    "hyperband": "it needs Katib's resource-budget trial protocol",
    "pbt": "it needs checkpoint exchange between trials",
    "enas": "neural architecture search is not implemented",
    "darts": "neural architecture search is not implemented",
    "sobol": "Optuna has no Sobol sampler with Katib's semantics (goptuna's)",
}
EARLY_STOPPING_ALGORITHMS: Mapping[str, frozenset[str]] = {
    "medianstop": frozenset({"min_trials_required", "start_step"})
}
COLLECTOR_KINDS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "Custom", "Push")
_RESUME_POLICIES = ("", "Never", "LongRunning", "FromVolume")
_PARAMETER_TYPES = ("int", "double", "categorical", "discrete", "")
_DISTRIBUTIONS = ("uniform", "logUniform", "normal", "logNormal", "")
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?")
_PLACEHOLDER = re.compile(r"\$\{trialParameters\.[^}]+\}")
_META = re.compile(
    r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|(Labels|Annotations)\[[^\]]+\])\}$"
)


def _value(value: Any) -> str:
    """A value as Go's field.Invalid prints it (strings quoted, numbers bare)."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def _invalid(path: str, value: Any, message: str) -> FieldError:
    return FieldError(path, f"{_value(value)}: {message}")


def _is_trainjob(spec: Mapping[str, Any]) -> bool:
    return str(spec.get("kind")) == "TrainJob" and str(spec.get("apiVersion", "")).startswith(
        "trainer.kubeflow.org/"
    )


def default_experiment(experiment: dict[str, Any]) -> dict[str, Any]:
    """Katib's mutating webhook (``SetDefault``) on an Experiment, in place; returns it."""
    spec = experiment.setdefault("spec", {})
    if spec.get("parallelTrialCount") is None:
        spec["parallelTrialCount"] = 3
    if not spec.get("resumePolicy"):
        spec["resumePolicy"] = "Never"
    objective = spec.get("objective")
    if isinstance(objective, dict) and not objective.get("metricStrategies"):
        # Additional metrics follow the objective's direction too, as Katib's code does.
        strategy = "max" if objective.get("type") == "maximize" else "min"
        names = [
            objective.get("objectiveMetricName"),
            *list_at(objective, "additionalMetricNames"),
        ]
        objective["metricStrategies"] = [{"name": n, "value": strategy} for n in names if n]
    template = spec.get("trialTemplate")
    if isinstance(template, dict):
        run_spec = template.get("trialSpec")
        if isinstance(run_spec, dict) and _is_trainjob(run_spec):
            template.setdefault("successCondition", TRAINJOB_SUCCESS_CONDITION)
            template.setdefault("failureCondition", TRAINJOB_FAILURE_CONDITION)
            template.setdefault(
                "primaryPodLabels",
                {
                    "jobset.sigs.k8s.io/replicatedjob-name": "node",
                    "batch.kubernetes.io/job-completion-index": "0",
                },
            )
        elif isinstance(run_spec, dict) and run_spec.get("kind") == "Job":
            template.setdefault("successCondition", _JOB_SUCCESS_CONDITION)
            template.setdefault("failureCondition", _JOB_FAILURE_CONDITION)
    collector = spec.setdefault("metricsCollectorSpec", {}).setdefault("collector", {})
    if not collector.get("kind"):
        collector["kind"] = "StdOut"
    source = obj_at(spec["metricsCollectorSpec"], "source")
    if collector["kind"] == "File":
        path = source.setdefault("fileSystemPath", {})
        path.setdefault("path", "/var/log/katib/metrics.log")
        path.setdefault("kind", "File")
        path.setdefault("format", "TEXT")
        spec["metricsCollectorSpec"]["source"] = source
    for parameter in list_at(spec, "parameters"):
        if isinstance(parameter, dict):
            space = parameter.setdefault("feasibleSpace", {})
            if isinstance(space, dict) and not space.get("distribution"):
                space["distribution"] = "uniform"
    return experiment


def validate_experiment(
    experiment: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> list[FieldError]:
    """Katib's validating webhook on a defaulted Experiment: every error, with Katib's words."""
    errors: list[FieldError] = []
    name = str(obj_at(experiment, "metadata").get("name") or "")
    if not _NAME.match(name):
        errors.append(
            _invalid(
                "metadata.name",
                name,
                "name must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name', "
                "or 'abc-123', regex used for validation is '^[a-z]([-a-z0-9]*[a-z0-9])?)'",
            )
        )
    elif len(name) > 40:
        errors.append(_invalid("metadata.name", name, "must be no more than 40 characters"))
    spec = obj_at(experiment, "spec")
    max_trials, parallel, max_failed = (
        spec.get("maxTrialCount"),
        spec.get("parallelTrialCount"),
        spec.get("maxFailedTrialCount"),
    )
    for field, value in (
        ("maxTrialCount", max_trials),
        ("parallelTrialCount", parallel),
        ("maxFailedTrialCount", max_failed),
    ):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            errors.append(_invalid(f"spec.{field}", value, "must be an integer"))
    if errors:
        return errors
    if max_failed is not None and max_failed < 0:
        errors.append(_invalid("spec.maxFailedTrialCount", max_failed, "should not be less than 0"))
    if max_trials is not None and max_trials <= 0:
        errors.append(_invalid("spec.maxTrialCount", max_trials, "must be greater than 0"))
    if parallel is not None and parallel <= 0:
        errors.append(_invalid("spec.parallelTrialCount", parallel, "must be greater than 0"))
    if max_failed is not None and max_trials is not None and max_failed > max_trials:
        errors.append(
            _invalid(
                "spec.maxFailedTrialCount",
                max_failed,
                "should be less than or equal to spec.maxTrialCount",
            )
        )
    if parallel is not None and max_trials is not None and parallel > max_trials:
        errors.append(
            _invalid(
                "spec.parallelTrialCount",
                parallel,
                "should be less than or equal to spec.maxTrialCount",
            )
        )
    if old is not None:
        errors += _validate_update(experiment, old)
    objective_errors = _validate_objective(spec.get("objective"))
    if objective_errors:
        return errors + objective_errors
    errors += _validate_algorithm(spec.get("algorithm"), "spec.algorithm", ALGORITHMS, "Suggestion")
    if spec.get("earlyStopping") is not None:
        errors += _validate_algorithm(
            spec["earlyStopping"], "spec.earlyStopping", EARLY_STOPPING_ALGORITHMS, "EarlyStopping"
        )
    if spec.get("resumePolicy", "") not in _RESUME_POLICIES:
        errors.append(
            _invalid("spec.resumePolicy", spec.get("resumePolicy"), "invalid ResumePolicyType")
        )
    errors += _validate_trial_template(spec)
    parameters = list_at(spec, "parameters")
    if not parameters and spec.get("nasConfig") is None:
        errors.append(
            FieldError("spec", "spec.parameters or spec.nasConfig must be specified", "Required")
        )
    if parameters and spec.get("nasConfig") is not None:
        errors.append(
            FieldError("spec", "only one of spec.parameters and spec.nasConfig can be specified")
        )
    if spec.get("nasConfig") is not None:
        errors.append(
            FieldError(
                "spec.nasConfig",
                "neural architecture search is not supported by kubetrain's local engine",
                "Forbidden",
            )
        )
    errors += _validate_parameters(parameters)
    errors += _validate_collector(obj_at(spec, "metricsCollectorSpec"))
    return errors


def _validate_update(experiment: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    spec, old_spec = dict(obj_at(experiment, "spec")), dict(obj_at(old, "spec"))
    if spec == old_spec:
        return []
    errors: list[FieldError] = []
    status = obj_at(old, "status")
    if _completed(status) and not restartable(old):
        errors.append(
            _invalid(
                "spec.resumePolicy",
                spec.get("resumePolicy", ""),
                "Experiment can be restarted if it is in succeeded state by reaching max trials "
                "and spec.resumePolicy = LongRunning or spec.resumePolicy = FromVolume, when "
                "experiment is completed",
            )
        )
    max_trials = spec.get("maxTrialCount")
    if isinstance(max_trials, int) and max_trials <= int(status.get("trials") or 0):
        errors.append(
            _invalid("spec.maxTrialCount", max_trials, "must be greater than status.trials count")
        )
    editable = ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")
    if {k: v for k, v in spec.items() if k not in editable} != {
        k: v for k, v in old_spec.items() if k not in editable
    }:
        errors.append(
            FieldError(
                "spec",
                "only spec.parallelTrialCount, spec.maxTrialCount and spec.maxFailedTrialCount are editable",
                "Forbidden",
            )
        )
    return errors


def _completed(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        for c in list_at(status, "conditions")
    )


def restartable(experiment: Mapping[str, Any]) -> bool:
    """A completed Experiment Katib restarts when maxTrialCount is raised (LongRunning/FromVolume)."""
    status = obj_at(experiment, "status")
    succeeded = next(
        (
            c
            for c in list_at(status, "conditions")
            if c.get("type") == "Succeeded" and c.get("status") == "True"
        ),
        None,
    )
    policy = obj_at(experiment, "spec").get("resumePolicy")
    return (
        succeeded is not None
        and succeeded.get("reason") == "ExperimentMaxTrialsReached"
        and policy in ("LongRunning", "FromVolume")
    )


def _validate_objective(objective: Any) -> list[FieldError]:
    if not isinstance(objective, Mapping):
        return [FieldError("spec.objective", "must be specified", "Required")]
    errors: list[FieldError] = []
    if objective.get("type") not in ("minimize", "maximize"):
        errors.append(
            _invalid(
                "spec.objective.type", objective.get("type", ""), "must be minimize or maximize"
            )
        )
    metric = objective.get("objectiveMetricName")
    if not metric:
        errors.append(
            FieldError("spec.objective.objectiveMetricName", "must be specified", "Required")
        )
    if metric and metric in list_at(objective, "additionalMetricNames"):
        errors.append(
            FieldError(
                "spec.objective.additionalMetricNames",
                "should not contain spec.objective.objectiveMetricName",
            )
        )
    goal = objective.get("goal")
    if goal is not None and (isinstance(goal, bool) or not isinstance(goal, int | float)):
        errors.append(_invalid("spec.objective.goal", goal, "must be a number"))
    return errors


def _validate_algorithm(
    spec: Any, path: str, known: Mapping[str, frozenset[str]], what: str
) -> list[FieldError]:
    if not isinstance(spec, Mapping):
        return [FieldError(path, "must be specified", "Required")]
    name = str(spec.get("algorithmName") or "")
    if not name:
        return [FieldError(f"{path}.algorithmName", "must be specified", "Required")]
    if name not in known:
        why = _UNSERVED.get(name, f"unknown algorithm {name!r}; served: {', '.join(known)}")
        return [
            _invalid(
                f"{path}.algorithmName",
                name,
                f"unable to get {what} config data for algorithm {name}: kubetrain's local "
                f"engine does not serve it ({why})",
            )
        ]
    errors: list[FieldError] = []
    for i, setting in enumerate(list_at(spec, "algorithmSettings")):
        sname = str(as_dict(setting).get("name") or "")
        svalue = as_dict(setting).get("value")
        at = f"{path}.algorithmSettings[{i}]"
        if sname not in known[name]:
            errors.append(
                _invalid(
                    f"{at}.name",
                    sname,
                    f"unknown setting for {name}; known: {', '.join(sorted(known[name]))}",
                )
            )
            continue
        numeric = sname not in ("base_estimator", "acq_func", "acq_optimizer", "restart_strategy")
        if numeric:
            try:
                number = float(str(svalue))
            except ValueError:
                errors.append(_invalid(f"{at}.value", svalue, f"{sname} must be a number"))
                continue
            minimum = 1 if sname in ("min_trials_required", "start_step") else 0
            if number < minimum or (
                sname in ("random_state", "min_trials_required", "start_step", "n_startup_trials")
                and not number.is_integer()
            ):
                errors.append(
                    _invalid(f"{at}.value", svalue, f"{sname} must be an integer >= {minimum}")
                )
    return errors


def _validate_trial_template(spec: Mapping[str, Any]) -> list[FieldError]:
    template = spec.get("trialTemplate")
    path = "spec.trialTemplate"
    if not isinstance(template, Mapping):
        return [FieldError(path, "must be specified", "Required")]
    errors: list[FieldError] = []
    if not template.get("primaryContainerName"):
        errors.append(FieldError(f"{path}.primaryContainerName", "must be specified", "Required"))
    if not template.get("successCondition") or not template.get("failureCondition"):
        errors.append(
            FieldError(path, "successCondition and failureCondition must be specified", "Required")
        )
    else:
        for key in ("successCondition", "failureCondition"):
            if condition_type(str(template[key])) is None:
                errors.append(
                    _invalid(
                        f"{path}.{key}",
                        template[key],
                        'kubetrain evaluates only conditions of the form status.conditions.#(type=="T")#|#(status=="True")#',
                    )
                )
    trial_parameters = template.get("trialParameters")
    if trial_parameters is None:
        return [*errors, FieldError(f"{path}.trialParameters", "must be specified", "Required")]
    run_spec = template.get("trialSpec")
    if run_spec is None and template.get("configMap") is None:
        return [
            *errors,
            FieldError(
                f"{path}.TrialSource",
                "spec.trialTemplate.trialSpec or spec.trialTemplate.configMap must be specified",
                "Required",
            ),
        ]
    if run_spec is not None and template.get("configMap") is not None:
        return [
            *errors,
            FieldError(
                path,
                "only one of spec.trialTemplate.trialSpec or spec.trialTemplate.configMap can be specified",
                "Required",
            ),
        ]
    if run_spec is None:
        return [
            *errors,
            FieldError(
                f"{path}.configMap",
                "trial templates from ConfigMaps are not supported by kubetrain's local engine; inline it as trialSpec",
                "Forbidden",
            ),
        ]
    if not isinstance(run_spec, Mapping):
        return [
            *errors,
            _invalid(path, "", "unable to parse spec.trialTemplate: trialSpec must be an object"),
        ]
    text = json.dumps(run_spec, sort_keys=True)
    names = {str(p.get("name")) for p in list_at(spec, "parameters") if isinstance(p, Mapping)}
    seen_names: set[str] = set()
    seen_refs: set[str] = set()
    for i, parameter in enumerate(trial_parameters):
        at = f"{path}.trialParameters[{i}]"
        pname = str(as_dict(parameter).get("name") or "")
        ref = str(as_dict(parameter).get("reference") or "")
        if not pname or not ref or "{" in pname or "}" in pname:
            errors.append(
                _invalid(
                    at,
                    "",
                    "name and reference must be specified and name must not contain '{' or '}'",
                )
            )
            continue
        if pname in seen_names:
            errors.append(
                _invalid(
                    f"{at}.name",
                    pname,
                    f"parameter name {pname} can't be duplicated in spec.trialTemplate.trialParameters",
                )
            )
            continue
        if ref in seen_refs:
            errors.append(
                _invalid(
                    f"{at}.reference",
                    ref,
                    f"parameter reference {ref} can't be duplicated in spec.trialTemplate.trialParameters",
                )
            )
            continue
        seen_names.add(pname)
        seen_refs.add(ref)
        if names and not _META.match(ref) and ref not in names:
            errors.append(
                _invalid(
                    f"{at}.reference",
                    ref,
                    f"parameter reference {ref} does not exist in spec.parameters",
                )
            )
        token = "${trialParameters." + pname + "}"
        if token not in text:
            errors.append(
                _invalid(
                    f"{at}.name",
                    pname,
                    f"parameter name: {pname} in spec.trialParameters not found in spec.trialTemplate",
                )
            )
            return errors
        text = text.replace(token, "test-value")
    left = _PLACEHOLDER.findall(text)
    if left:
        errors.append(
            _invalid(
                path,
                "",
                f"parameters: {left} in spec.trialTemplate not found in spec.trialParameters",
            )
        )
    meta = obj_at(run_spec, "metadata")
    if isinstance(meta, Mapping) and (meta.get("name") or meta.get("namespace")):
        errors.append(
            _invalid(
                path,
                "",
                "metadata.name and metadata.namespace in spec.trialTemplate must be omitted",
            )
        )
    if not run_spec.get("apiVersion") or not run_spec.get("kind"):
        errors.append(
            FieldError(
                path, "APIVersion and Kind in spec.trialTemplate must be specified", "Required"
            )
        )
    elif not _is_trainjob(run_spec):
        errors.append(
            _invalid(
                f"{path}.trialSpec.kind",
                run_spec.get("kind"),
                "kubetrain's local engine runs TrainJob (trainer.kubeflow.org) trials only",
            )
        )
    return errors


def condition_type(expression: str) -> str | None:
    """The condition type of a Katib gjson success/failure condition of the default shape."""
    found = re.fullmatch(
        r'status\.conditions\.#\(type=="([A-Za-z]+)"\)#\|#\(status=="True"\)#', expression.strip()
    )
    return found.group(1) if found else None


def _validate_parameters(parameters: list[Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, parameter in enumerate(parameters):
        at = f"spec.parameters[{i}]"
        if not isinstance(parameter, Mapping):
            errors.append(_invalid(at, parameter, "must be an object"))
            continue
        ptype = parameter.get("parameterType", "")
        if ptype not in _PARAMETER_TYPES:
            errors.append(
                _invalid(f"{at}.parameterType", ptype, f"parameterType: {ptype} is not supported")
            )
        space = obj_at(parameter, "feasibleSpace")
        distribution = space.get("distribution", "")
        if distribution not in _DISTRIBUTIONS:
            errors.append(
                _invalid(
                    f"{at}.feasibleSpace.distribution",
                    distribution,
                    f"distribution: {distribution} is not supported",
                )
            )
        if not {k: v for k, v in space.items() if v not in ("", None, [])}:
            errors.append(
                FieldError(f"{at}.feasibleSpace", "feasibleSpace must be specified", "Required")
            )
            continue
        if ptype in ("double", "int"):
            if space.get("list"):
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace.list",
                        space["list"],
                        f"feasibleSpace.list is not supported for parameterType: {ptype}",
                    )
                )
            if not space.get("max") or not space.get("min"):
                errors.append(
                    FieldError(
                        f"{at}.feasibleSpace.max",
                        f"feasibleSpace.max or feasibleSpace.min must be specified for parameterType: {ptype}",
                        "Required",
                    )
                )
                continue
            # Beyond the webhook (Katib's suggestion services fail later on these): numbers that
            # parse, min < max, a positive log range, and no normal distributions (Katib master
            # refuses them too, v0.19.0 silently left them out of the search).
            try:
                low, high = float(space["min"]), float(space["max"])
                step = float(space["step"]) if space.get("step") else None
            except (TypeError, ValueError):
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace", dict(space), "min, max and step must be numbers"
                    )
                )
                continue
            if ptype == "int" and not all(float(v).is_integer() for v in (low, high, step or 1)):
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace",
                        dict(space),
                        "min, max and step must be integers for parameterType: int",
                    )
                )
            if not low < high:
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace.max",
                        space["max"],
                        "must be greater than feasibleSpace.min",
                    )
                )
            if step is not None and not step > 0:
                errors.append(
                    _invalid(f"{at}.feasibleSpace.step", space["step"], "must be greater than 0")
                )
            if distribution == "logUniform" and low <= 0:
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace.min",
                        space["min"],
                        "must be greater than 0 for distribution: logUniform",
                    )
                )
            if distribution in ("normal", "logNormal"):
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace.distribution",
                        distribution,
                        "normal and logNormal distributions are not supported by the Optuna suggestion service",
                    )
                )
        elif ptype in ("categorical", "discrete"):
            if space.get("max") or space.get("min") or space.get("step"):
                errors.append(
                    _invalid(
                        f"{at}.feasibleSpace",
                        dict(space),
                        f"feasibleSpace .max, .min and .step is not supported for parameterType: {ptype}",
                    )
                )
            elif not space.get("list"):
                errors.append(
                    FieldError(
                        f"{at}.feasibleSpace.list",
                        f"must be specified for parameterType: {ptype}",
                        "Required",
                    )
                )
            elif ptype == "discrete":
                try:
                    [float(v) for v in space["list"]]
                except (TypeError, ValueError):
                    errors.append(
                        _invalid(
                            f"{at}.feasibleSpace.list",
                            space["list"],
                            "discrete values must be numbers",
                        )
                    )
    return errors


def _validate_collector(spec: Mapping[str, Any]) -> list[FieldError]:
    kind = obj_at(spec, "collector").get("kind", "")
    path = "spec.metricsCollectorSpec"
    source = obj_at(spec, "source")
    errors: list[FieldError] = []
    if kind not in COLLECTOR_KINDS:
        return [_invalid(f"{path}.collector.kind", kind, f"invalid metrics collector kind: {kind}")]
    if kind == "File":
        fs = obj_at(source, "fileSystemPath")
        if fs.get("kind") != "File" or not str(fs.get("path", "")).startswith("/"):
            errors.append(
                FieldError(
                    f"{path}.source.fileSystemPath.path",
                    "file path where metrics file exists is required",
                    "Required",
                )
            )
        if fs.get("format") not in ("TEXT", "JSON"):
            errors.append(
                FieldError(
                    f"{path}.source.fileSystemPath.format",
                    "format of metrics file is required for metrics collector",
                    "Required",
                )
            )
        if fs.get("format") == "JSON" and source.get("filter") is not None:
            errors.append(
                _invalid(
                    f"{path}.source.filter",
                    "",
                    "filter must be nil when format of metrics file is json",
                )
            )
    elif kind not in ("StdOut",):
        errors.append(
            _invalid(
                f"{path}.collector.kind",
                kind,
                "kubetrain's local engine collects metrics with StdOut or File (and reads TrainJob trainerStatus.metrics); this kind is not supported",
            )
        )
    for fmt in list_at(source, "filter", "metricsFormat"):
        try:
            compiled = re.compile(fmt)
        except re.error as err:
            errors.append(
                _invalid(f"{path}.source.filter.metricsFormat", fmt, f"invalid filter: {err}")
            )
            continue
        if compiled.groups < 2:
            errors.append(
                _invalid(
                    f"{path}.source.filter.metricsFormat",
                    fmt,
                    "two top subexpressions are required",
                )
            )
    return errors


@dataclass(frozen=True, slots=True)
class SearchParameter:
    """One ``spec.parameters[]`` entry, parsed: numbers as numbers, choices as Katib's strings."""

    name: str
    type: str  # double | int | discrete | categorical
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False
    choices: tuple[str, ...] = ()

    def grid(self) -> list[str]:
        """Grid values as Katib's services write them (``None`` where a double has no step)."""
        if self.choices:
            return list(self.choices)
        if self.type == "int":
            step = int(self.step or 1)
            return [str(v) for v in range(int(self.low), int(self.high) + 1, step)]
        assert self.step is not None
        count = math.floor((self.high - self.low) / self.step + 1e-9) + 1
        return [str(self.low + i * self.step) for i in range(count)]


def parse_parameters(experiment: Mapping[str, Any]) -> list[SearchParameter]:
    """The search space of a validated Experiment."""
    out: list[SearchParameter] = []
    for parameter in list_at(experiment, "spec", "parameters"):
        space = obj_at(parameter, "feasibleSpace")
        ptype = str(parameter.get("parameterType") or "categorical")
        if ptype in ("categorical", "discrete"):
            out.append(
                SearchParameter(
                    parameter["name"], ptype, choices=tuple(str(v) for v in list_at(space, "list"))
                )
            )
            continue
        out.append(
            SearchParameter(
                parameter["name"],
                ptype,
                low=float(space["min"]),
                high=float(space["max"]),
                step=float(space["step"]) if space.get("step") else None,
                log=space.get("distribution") == "logUniform",
            )
        )
    return out
