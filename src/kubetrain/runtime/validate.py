"""Admission for TrainJobs and runtimes: the CRD's schema and CEL rules, then upstream's webhooks.

Order is the API server's: schema + CEL first (422 Invalid); only an object that passes them
reaches the validating webhooks (403 Forbidden), which return every plugin's errors together.
Paths and messages are upstream's (trainer v2.3.0 pkg/webhooks/), including its quirks (``spec.RuntimeRef``
with a capital R, ``<nil>`` as the path of the CRD's root-level rules).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from kubetrain.api.access import as_dict, list_at, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.meta import format_time
from kubetrain.runtime.bounds import runtime_bound_errors, trainjob_bound_errors
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import (
    ANCESTOR_LABEL,
    CLUSTER_TRAINING_RUNTIME,
    TRAINING_RUNTIME,
    new_runtime_info,
    registry_key,
    runtime_ref,
)
from kubetrain.runtime.framework import ValidationContext
from kubetrain.runtime.plugins import framework_for
from kubetrain.runtime.podspec import Obj, tree_copy
from kubetrain.runtime.render import SUPPORTED_RUNTIME_KEYS

__all__ = [
    "DEPRECATION_POLICY_URL",
    "Validation",
    "default_trainjob",
    "runtime_webhook_enabled",
    "trainjob_crd_errors",
    "validate_runtime",
    "validate_trainjob",
]

DEPRECATION_POLICY_URL = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)
_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
_MANAGED_BY = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
_IMMUTABLE = "field is immutable"
# Pod-spec fields of a runtime patch that the CRD marks immutable (transition rules).
_PATCH_IMMUTABLE = (
    "serviceAccountName",
    "volumes",
    "initContainers",
    "containers",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)
_ROOT = "<nil>"  # how apimachinery prints the nil path of a rule on the CRD's root


@dataclass(frozen=True, slots=True)
class Validation:
    """The verdict: every error (empty = admitted) and the warnings to show either way."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No errors."""
        return not self.errors


def _defaulted(obj: Obj) -> Obj:
    # The API server applies CRD defaults before validation; never touch the caller's object.
    from kubetrain.api.schema import apply_defaults

    copy: Obj = tree_copy(obj)
    return apply_defaults(copy)


def _schema_errors(obj: Obj) -> list[FieldError]:
    from kubetrain.api.schema import schema_errors

    return schema_errors(obj)


# --- TrainJob: CRD ------------------------------------------------------------------------------


def _transition(path: str, new: Obj, old: Obj, key: str, errors: list[FieldError]) -> None:
    # Transition rules run only when the field exists in both objects.
    if key in new and key in old and new[key] != old[key]:
        errors.append(FieldError(f"{path}.{key}" if path else key, _IMMUTABLE))


def _patch_transitions(new_spec: Obj, old_spec: Obj, errors: list[FieldError]) -> None:
    old_by_manager = {
        as_dict(p).get("manager"): as_dict(p) for p in list_at(old_spec, "runtimePatches")
    }
    for i, patch in enumerate(list_at(new_spec, "runtimePatches")):
        patch = as_dict(patch)
        old_patch = old_by_manager.get(patch.get("manager"))
        if old_patch is None:
            continue
        base = f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs"
        new_jobs = list_at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        old_jobs = list_at(old_patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        old_by_name = {as_dict(j).get("name"): as_dict(j) for j in old_jobs}
        for j, rjob in enumerate(new_jobs):
            rjob = as_dict(rjob)
            old_job = old_by_name.get(rjob.get("name"))
            if old_job is None:
                continue
            new_pod = obj_at(rjob, "template", "spec", "template", "spec")
            old_pod = obj_at(old_job, "template", "spec", "template", "spec")
            for key in _PATCH_IMMUTABLE:
                _transition(
                    f"{base}[{j}].template.spec.template.spec", new_pod, old_pod, key, errors
                )


def trainjob_crd_errors(job: Obj, old: Obj | None = None) -> list[FieldError]:
    """The TrainJob CRD's OpenAPI schema and CEL rules (422 Invalid from the API server)."""
    errors = _schema_errors(job)
    name = obj_at(job, "metadata").get("name")
    if isinstance(name, str):
        if not _NAME_RE.match(name):
            errors.append(FieldError(_ROOT, "metadata.name must match RFC 1035 DNS label format"))
        if len(name) > 63:
            errors.append(FieldError(_ROOT, "metadata.name must be no more than 63 characters"))
    spec = obj_at(job, "spec")
    managed_by = spec.get("managedBy")
    if isinstance(managed_by, str) and managed_by not in _MANAGED_BY:
        errors.append(
            FieldError(
                "spec.managedBy",
                "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
            )
        )
    for source in ("dataset", "model"):
        uri = obj_at(spec, "initializer", source).get("storageUri")
        if isinstance(uri, str) and uri and not _URI_RE.match(uri):
            errors.append(
                FieldError(
                    f"spec.initializer.{source}.storageUri",
                    "storageUri may be empty, or it must be a valid URI (scheme://...)",
                )
            )
    if old is not None:
        old_spec = obj_at(old, "spec")
        for key in ("activeDeadlineSeconds", "initializer", "managedBy", "runtimeRef", "trainer"):
            _transition("spec", spec, old_spec, key, errors)
        _patch_transitions(spec, old_spec, errors)
    return errors


# --- TrainJob: webhook --------------------------------------------------------------------------


def _runtime_missing(kind: str, name: str) -> FieldError:
    if kind == TRAINING_RUNTIME:
        return FieldError(
            "spec.runtimeRef",
            f'trainingruntimes.trainer.kubeflow.org "{name}" not found: '
            "specified trainingRuntime must be created before the TrainJob is created",
        )
    return FieldError(
        "spec.RuntimeRef",
        f'clustertrainingruntimes.trainer.kubeflow.org "{name}" not found: '
        "specified clusterTrainingRuntime must be created before the TrainJob is created",
    )


def validate_trainjob(
    trainjob: Obj,
    runtime: Obj | None,
    *,
    old: Obj | None = None,
    jobset: Obj | None = None,
    gates: FeatureGates | None = None,
    priority_classes: Collection[str] | None = None,
    environment: Environment | None = None,
) -> Validation:
    """Admit a TrainJob (CREATE when ``old`` is None, else UPDATE) against its live runtime.

    ``runtime`` is the runtime ``spec.runtimeRef`` names (None: it does not exist); ``jobset``
    the TrainJob's live JobSet (runtimePatches rules on UPDATE); ``priority_classes`` the
    PriorityClass names in the cluster (Volcano check; None skips it).
    """
    gates = gates if gates is not None else FeatureGates()
    env = environment if environment is not None else Environment()
    new = _defaulted(trainjob)
    old_d = _defaulted(old) if old is not None else None
    crd = trainjob_crd_errors(new, old_d)
    if crd:
        return Validation(errors=crd)
    # Before anything is built from it: a job that could never run is refused here. Bad
    # process counts are left to the plugins first, whose messages are upstream's.
    bounds = trainjob_bound_errors(new, runtime, max_num_nodes=env.max_num_nodes)
    if any("numProcPerNode" not in e.path for e in bounds):
        return Validation(errors=bounds)

    key = registry_key(new)
    if key not in SUPPORTED_RUNTIME_KEYS:
        return Validation(errors=[FieldError("", f"unsupported runtime: {key}")])
    _, kind, name = runtime_ref(new)
    if runtime is None:
        return Validation(errors=[_runtime_missing(kind, name)])
    warnings: list[str] = []
    rmeta = obj_at(runtime, "metadata")
    if (
        kind == CLUSTER_TRAINING_RUNTIME
        and obj_at(rmeta, "labels").get("trainer.kubeflow.org/support") == "deprecated"
    ):
        warnings.append(
            f'Referenced ClusterTrainingRuntime "{rmeta.get("name", "")}" is deprecated and will be removed in a'
            f" future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_POLICY_URL}"
        )
    try:
        info = new_runtime_info(new, runtime, env)
    except Exception as exc:  # upstream ignores this error and its plugins see no info
        return Validation(
            errors=[FieldError("spec.runtimePatches", f"cannot be applied to the runtime: {exc}")],
            warnings=warnings,
        )
    ctx = ValidationContext(
        gates=gates,
        old=old_d,
        jobset=jobset,
        priority_classes=frozenset(priority_classes) if priority_classes is not None else None,
        runtime=runtime,
    )
    errors = framework_for(gates, env).run_validation(info, new, ctx)
    errors += [e for e in bounds if e.path not in {x.path for x in errors}]
    return Validation(errors=errors, warnings=warnings)


# --- TrainJob: mutating webhook ---------------------------------------------------------------


def default_trainjob(trainjob: Obj, *, old: Obj | None = None, now: datetime) -> Obj:
    """The mutating webhook (trainer v2.3.0 pkg/webhooks/trainjob_webhook.go): stamp ``runtimePatches[].time``; returns a copy.

    CREATE: every patch without a time gets ``now``. UPDATE: a manager already present keeps
    its old time when the entry is otherwise unchanged, else gets ``now``; new managers get
    ``now`` unless they carry a time. This is the only mutation upstream's webhook makes.
    """
    out: Obj = tree_copy(trainjob)
    patches = list_at(out, "spec", "runtimePatches")
    stamp = format_time(now)
    old_by_manager = (
        {as_dict(p).get("manager"): as_dict(p) for p in list_at(old, "spec", "runtimePatches")}
        if old is not None
        else None
    )
    for patch in patches:
        if not isinstance(patch, dict):
            continue
        if old_by_manager is None:
            patch.setdefault("time", stamp)
            continue
        previous = old_by_manager.get(patch.get("manager"))
        if previous is not None:
            same = {k: v for k, v in patch.items() if k != "time"} == {
                k: v for k, v in previous.items() if k != "time"
            }
            if same and "time" in previous:
                patch["time"] = previous["time"]
            elif same:
                patch.pop("time", None)
            else:
                patch["time"] = stamp
        elif patch.get("time") is None:
            patch["time"] = stamp
    return out


# --- runtimes -----------------------------------------------------------------------------------


def runtime_webhook_enabled(runtime: Obj) -> bool:
    """False for runtimes labelled ``trainer.kubeflow.org/webhook-validation: disabled`` (v2.3):
    the webhook configuration's objectSelector keeps them away from the runtime webhooks."""
    labels = obj_at(runtime, "metadata", "labels")
    return labels.get("trainer.kubeflow.org/webhook-validation") != "disabled"


def _runtime_crd_errors(runtime: Obj, old: Obj | None) -> list[FieldError]:
    errors = _schema_errors(runtime)
    spec = obj_at(runtime, "spec")
    ml = spec.get("mlPolicy")
    if isinstance(ml, dict):
        if sum(1 for k in ("torch", "mpi", "jax", "xgboost", "flux") if k in ml) > 1:
            errors.append(FieldError("spec.mlPolicy", "Only one of the policy can be configured"))
        nproc = obj_at(ml, "flux").get("numProcPerNode")
        if isinstance(nproc, int) and not isinstance(nproc, bool) and nproc < 1:
            errors.append(
                FieldError(
                    "spec.mlPolicy.flux.numProcPerNode", "NumProcPerNode in fluxPolicy must be >= 1"
                )
            )
        targets = list_at(ml, "torch", "envInjection", "targets")
        for i, t in enumerate(targets):
            if "node" in list_at(t, "containerNames"):
                errors.append(
                    FieldError(
                        f"spec.mlPolicy.torch.envInjection.targets[{i}].containerNames",
                        "containerNames must not include the main node container because PET_* envs are"
                        " always injected into it",
                    )
                )
    js = obj_at(spec, "template", "spec")
    if obj_at(js, "startupPolicy").get("startupPolicyOrder") == "InOrder" and any(
        "dependsOn" in as_dict(j) for j in list_at(js, "replicatedJobs")
    ):
        errors.append(
            FieldError(
                "spec.template.spec", "StartupPolicy and DependsOn APIs are mutually exclusive"
            )
        )
    for i, policy in enumerate(list_at(js, "volumeClaimPolicies")):
        if any(obj_at(t, "metadata").get("namespace") for t in list_at(policy, "templates")):
            errors.append(
                FieldError(
                    f"spec.template.spec.volumeClaimPolicies[{i}]",
                    "namespace cannot be set for VolumeClaimPolicies templates",
                )
            )
    if old is not None:
        old_js = obj_at(old, "spec", "template", "spec")
        for key in (
            "failurePolicy",
            "network",
            "startupPolicy",
            "successPolicy",
            "volumeClaimPolicies",
        ):
            if key in js and key in old_js and js[key] != old_js[key]:
                errors.append(FieldError(f"spec.template.spec.{key}", "Value is immutable"))
        old_jobs = {as_dict(j).get("name"): as_dict(j) for j in list_at(old_js, "replicatedJobs")}
        for i, j in enumerate(list_at(js, "replicatedJobs")):
            o = old_jobs.get(as_dict(j).get("name"))
            if (
                o is not None
                and "dependsOn" in as_dict(j)
                and "dependsOn" in o
                and as_dict(j)["dependsOn"] != o["dependsOn"]
            ):
                errors.append(
                    FieldError(
                        f"spec.template.spec.replicatedJobs[{i}].dependsOn", "Value is immutable"
                    )
                )
    return errors


_REQUIRED_CONTAINER = {
    "trainer": "node",
    "model-initializer": "model-initializer",
    "dataset-initializer": "dataset-initializer",
}


def validate_runtime(
    runtime: Obj,
    *,
    old: Obj | None = None,
    operation: Literal["CREATE", "UPDATE"] = "CREATE",
    webhook: bool = True,
    environment: Environment | None = None,
) -> Validation:
    """Admit a TrainingRuntime or ClusterTrainingRuntime: CRD rules, then the runtime webhook.

    The webhook runs on CREATE for TrainingRuntimes and on CREATE and UPDATE for
    ClusterTrainingRuntimes. Whether it runs at all for a runtime labelled
    ``webhook-validation: disabled`` is the webhook configuration's business: see
    ``runtime_webhook_enabled``; ``webhook=False`` applies only the CRD rules.
    """
    new = _defaulted(runtime)
    old_d = _defaulted(old) if old is not None and operation == "UPDATE" else None
    crd = _runtime_crd_errors(new, old_d)
    if crd:
        return Validation(errors=crd)
    env = environment if environment is not None else Environment()
    bounds = runtime_bound_errors(new, max_num_nodes=env.max_num_nodes)
    if bounds:
        return Validation(errors=bounds)
    kind = new.get("kind")
    if not webhook or (kind == TRAINING_RUNTIME and operation == "UPDATE"):
        return Validation()
    warnings: list[str] = []
    meta = obj_at(new, "metadata")
    if (
        kind == CLUSTER_TRAINING_RUNTIME
        and operation == "CREATE"
        and obj_at(meta, "labels").get("trainer.kubeflow.org/support") == "deprecated"
    ):
        warnings.append(
            f'ClusterTrainingRuntime "{meta.get("name", "")}" is deprecated and will be removed in a future'
            f" release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_POLICY_URL}"
        )
    errors: list[FieldError] = []
    base = "spec.template.spec.replicatedJobs"
    jobs = list_at(new, "spec", "template", "spec", "replicatedJobs")
    for i, rjob in enumerate(jobs):
        template = obj_at(rjob, "template")
        ancestor = obj_at(template, "metadata", "labels").get(ANCESTOR_LABEL)
        if ancestor not in _REQUIRED_CONTAINER:
            continue
        replicas = as_dict(rjob).get("replicas", 1)
        if replicas != 1:
            errors.append(FieldError(f"{base}[{i}].replicas", "always must be 1"))
        containers = list_at(template, "spec", "template", "spec", "containers")
        if not any(as_dict(c).get("name") == _REQUIRED_CONTAINER[ancestor] for c in containers):
            errors.append(
                FieldError(
                    f"{base}[{i}].template.spec.template.spec.containers",
                    f"must contain the required container for the ancestor: {ancestor}",
                )
            )
    return Validation(errors=errors, warnings=warnings)
