"""Trainer's admission webhooks as one pure object: the embedded API server calls it in-process.

``TrainerAdmission`` is upstream's mutating TrainJob webhook (runtimePatches time stamps) and
the three validating webhooks (TrainJob, TrainingRuntime, ClusterTrainingRuntime) behind the
``mutate``/``validate`` shape the embedded API server calls for every write. What a rule needs
from the cluster (the live runtime, the JobSet on UPDATE, PriorityClass names for Volcano) is
read through a ``Lookup``; everything else is ``validate_trainjob``/``validate_runtime``/
``default_trainjob``, the same functions the cluster webhook server calls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from kubetrain.api.access import obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.labels import (
    CLUSTER_TRAINING_RUNTIME_KIND as CLUSTER_TRAINING_RUNTIME,
)
from kubetrain.api.labels import (
    JOBSET_API_VERSION,
    TRAINER_API_VERSION,
    TRAINER_GROUP,
)
from kubetrain.api.labels import (
    TRAINING_RUNTIME_KIND as TRAINING_RUNTIME,
)
from kubetrain.api.labels import (
    TRAINJOB_KIND as TRAINJOB,
)
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import runtime_ref
from kubetrain.runtime.validate import (
    default_trainjob,
    runtime_webhook_enabled,
    validate_runtime,
    validate_trainjob,
)

__all__ = ["Lookup", "TrainerAdmission", "priority_class_names"]

PRIORITY_CLASS_API = ("scheduling.k8s.io/v1", "PriorityClass")


class Lookup(Protocol):
    """Read access to the cluster's objects (the embedded API server's store satisfies it)."""

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None: ...

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]: ...


def priority_class_names(lookup: Lookup) -> set[str]:
    return {str(obj_at(pc, "metadata").get("name")) for pc in lookup.list(*PRIORITY_CLASS_API)}


def _uses_volcano(runtime: dict[str, Any] | None) -> bool:
    policy = obj_at(runtime, "spec", "podGroupPolicy")
    return isinstance(policy, dict) and "volcano" in policy


class TrainerAdmission:
    """Upstream's webhooks for the embedded API server (trainer v2.3.0 pkg/webhooks/).

    Runtimes labelled ``trainer.kubeflow.org/webhook-validation: disabled`` skip the runtime
    webhooks (the webhook configurations' objectSelector) but keep their CRD rules.
    """

    def __init__(
        self,
        *,
        gates: FeatureGates | None = None,
        environment: Environment | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._gates = gates
        self._environment = environment
        self._clock = clock

    def mutate(
        self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, *, reader: Lookup
    ) -> dict[str, Any]:
        if obj.get("kind") != TRAINJOB or obj.get("apiVersion") != TRAINER_API_VERSION:
            return obj
        if operation not in ("CREATE", "UPDATE"):
            return obj
        return default_trainjob(obj, old=old if operation == "UPDATE" else None, now=self._clock())

    def validate(
        self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None, *, reader: Lookup
    ) -> tuple[list[FieldError], list[str]]:
        if operation not in ("CREATE", "UPDATE") or obj.get("apiVersion") != TRAINER_API_VERSION:
            return [], []
        kind = obj.get("kind")
        if kind == TRAINJOB:
            return self._trainjob(obj, old if operation == "UPDATE" else None, reader)
        if kind in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME):
            verdict = validate_runtime(
                obj,
                old=old,
                operation="UPDATE" if operation == "UPDATE" else "CREATE",
                webhook=runtime_webhook_enabled(obj),
                environment=self._environment,
            )
            return list(verdict.errors), list(verdict.warnings)
        return [], []

    def _trainjob(
        self, job: dict[str, Any], old: dict[str, Any] | None, reader: Lookup
    ) -> tuple[list[FieldError], list[str]]:
        meta = obj_at(job, "metadata")
        namespace = str(meta.get("namespace") or "")
        group, kind, name = runtime_ref(job)
        runtime = None
        if group == TRAINER_GROUP and kind in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME) and name:
            scope = namespace if kind == TRAINING_RUNTIME else None
            runtime = reader.get(TRAINER_API_VERSION, kind, scope, name)
        jobset = None
        if old is not None and meta.get("name"):
            jobset = reader.get(JOBSET_API_VERSION, "JobSet", namespace, str(meta["name"]))
        priority_classes = priority_class_names(reader) if _uses_volcano(runtime) else None
        verdict = validate_trainjob(
            job,
            runtime,
            old=old,
            jobset=jobset,
            gates=self._gates,
            priority_classes=priority_classes,
            environment=self._environment,
        )
        return list(verdict.errors), list(verdict.warnings)
