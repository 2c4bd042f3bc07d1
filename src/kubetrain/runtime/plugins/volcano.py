"""Volcano: a ``scheduling.volcano.sh/v1beta1`` PodGroup per TrainJob and the group-name
annotation on every pod (trainer v2.3.0 pkg/runtime/framework/plugins/volcano/), plus the queue and PriorityClass checks (trainer v2.3.0 pkg/webhooks/).

The PodGroup carries the gang totals (see :func:`kubetrain.runtime.podgroup.gang_totals`), the queue from the
JobSet-level annotation ``scheduling.volcano.sh/queue-name`` when present, the
``priorityClassName`` of the replicatedJob pods (the last one set wins) and the policy's
``networkTopology``. Like coscheduling, it is re-applied only while the TrainJob is suspended.
"""

from __future__ import annotations

from kubetrain.api.access import obj_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.framework import BuildContext, ObjectRef, ValidationContext, object_meta
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podgroup import gang_totals
from kubetrain.runtime.podspec import Obj

__all__ = ["GROUP_NAME_ANNOTATION", "QUEUE_ANNOTATION", "Volcano", "new"]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# Built into every cluster; a pod may name them without a PriorityClass object.
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")


def _priority_class_names(info: RuntimeInfo) -> list[str]:
    """Non-empty ``priorityClassName`` of every replicatedJob pod, in replicatedJob order."""
    names = []
    for rjob in info.iter_replicated_jobs():
        pod = obj_at(rjob, "template", "spec", "template", "spec")
        name = pod.get("priorityClassName")
        # Go reads the field through an apply configuration: "" marshals away and is unset.
        if isinstance(name, str) and name:
            names.append(name)
    return names


class Volcano:
    """Active with ``podGroupPolicy.volcano``."""

    name = "volcano"

    # --- phase 1 ------------------------------------------------------------------------------

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        if info.pod_group("volcano") is None:
            return []
        errors: list[FieldError] = []
        if info.annotations.get(QUEUE_ANNOTATION) == "":
            errors.append(
                FieldError(
                    f"spec.annotations[{QUEUE_ANNOTATION}]", "Volcano queue name must not be empty"
                )
            )
        if ctx.priority_classes is None:
            return errors  # cluster data unknown: the check needs the PriorityClass list
        for name in _priority_class_names(info):
            if name in SYSTEM_PRIORITY_CLASSES:
                # Upstream returns as soon as it meets a system class: later pods go unchecked.
                break
            if name not in ctx.priority_classes:
                errors.append(
                    FieldError(
                        "spec.templateSpec.priorityClassName",
                        f'PriorityClass "{name}" doesn\'t exist: '
                        f'priorityclasses.scheduling.k8s.io "{name}" not found',
                    )
                )
        return errors

    # --- phase 3 ------------------------------------------------------------------------------

    def enforce_pod_group_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if info.pod_group("volcano") is None:
            return
        info.pod_annotations[GROUP_NAME_ANNOTATION] = info.trainjob_name

    # --- phase 6 ------------------------------------------------------------------------------

    def existing_refs(self, trainjob_name: str, runtime_spec: Obj) -> list[ObjectRef]:
        # A PodGroup is re-applied only while the job is suspended: build checks for it.
        if "volcano" not in obj_at(runtime_spec, "podGroupPolicy"):
            return []
        return [ObjectRef("scheduling.volcano.sh/v1beta1", "PodGroup", trainjob_name)]

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        policy = info.pod_group("volcano")
        if policy is None:
            return []
        suspended = obj_at(job, "spec").get("suspend") is True
        if ctx.existing.get("PodGroup", info.trainjob_name) is not None and not suspended:
            return []
        members, resources = gang_totals(info)
        spec: Obj = {"minMember": members, "minResources": resources}
        if QUEUE_ANNOTATION in info.annotations:
            spec["queue"] = info.annotations[QUEUE_ANNOTATION]
        priority_classes = _priority_class_names(info)
        if priority_classes:
            spec["priorityClassName"] = priority_classes[-1]
        topology = policy.get("networkTopology")
        if isinstance(topology, dict):
            spec["networkTopology"] = {
                k: topology[k] for k in ("mode", "highestTierAllowed") if k in topology
            }
        return [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": object_meta(info, info.trainjob_name),
                "spec": spec,
            }
        ]


def new(gates: object, env: object) -> Volcano:
    """Always registered; inert unless the runtime has ``podGroupPolicy.volcano``."""
    return Volcano()
