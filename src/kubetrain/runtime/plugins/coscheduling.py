"""Coscheduling (scheduler-plugins): a ``scheduling.x-k8s.io/v1alpha1`` PodGroup per TrainJob and
the pod-group label on every pod (trainer v2.3.0 pkg/runtime/framework/plugins/coscheduling/).

The PodGroup counts every pod of every PodSet (initializers, launcher, nodes) and their summed
requests (:mod:`kubetrain.runtime.podgroup`). It is created when missing and re-applied only
while the TrainJob is suspended, so a running gang is never resized under the scheduler.
"""

from __future__ import annotations

from kubetrain.api.access import as_int, obj_at
from kubetrain.runtime.framework import BuildContext, ObjectRef, object_meta
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podgroup import gang_totals
from kubetrain.runtime.podspec import Obj

__all__ = ["POD_GROUP_LABEL", "Coscheduling", "new"]

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60  # the CRD default of scheduleTimeoutSeconds


def _suspended(job: Obj) -> bool:
    spec = job.get("spec")
    return isinstance(spec, dict) and spec.get("suspend") is True


class Coscheduling:
    """Active with ``podGroupPolicy.coscheduling``."""

    name = "coscheduling"

    def enforce_pod_group_policy(self, info: RuntimeInfo, job: Obj) -> None:
        if info.pod_group("coscheduling") is None:
            return
        info.pod_labels[POD_GROUP_LABEL] = info.trainjob_name

    def existing_refs(self, trainjob_name: str, runtime_spec: Obj) -> list[ObjectRef]:
        # A PodGroup is re-applied only while the job is suspended: build checks for it.
        if "coscheduling" not in obj_at(runtime_spec, "podGroupPolicy"):
            return []
        return [ObjectRef("scheduling.x-k8s.io/v1alpha1", "PodGroup", trainjob_name)]

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        policy = info.pod_group("coscheduling")
        if policy is None:
            return []
        if ctx.existing.get("PodGroup", info.trainjob_name) is not None and not _suspended(job):
            return []
        members, resources = gang_totals(info)
        return [
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": object_meta(info, info.trainjob_name),
                "spec": {
                    "minMember": members,
                    "minResources": resources,
                    "scheduleTimeoutSeconds": as_int(
                        policy.get("scheduleTimeoutSeconds"), DEFAULT_SCHEDULE_TIMEOUT_SECONDS
                    ),
                },
            }
        ]


def new(gates: object, env: object) -> Coscheduling:
    """Always registered; inert unless the runtime has ``podGroupPolicy.coscheduling``."""
    return Coscheduling()
