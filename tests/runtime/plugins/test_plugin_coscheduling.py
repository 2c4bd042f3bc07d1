"""Coscheduling plugin (trainer v2.3.0 pkg/runtime/framework/plugins/coscheduling/): the
scheduler-plugins PodGroup, the pod label that joins it, and the PodGroup it reads back."""

from __future__ import annotations

from typing import Any

import pytest
from plugin_runtimes import (
    GANG_NODE_RESOURCES,
    POD_GROUP_REAPPLIED,
    gang_objects,
    gang_runtime,
    gang_trainjob,
    pod_group_reapplied,
)

from kubetrain.runtime.framework import ObjectRef
from kubetrain.runtime.render import existing_refs

SDK_GPUS = {"requests": {"nvidia.com/gpu": 2.0}, "limits": {"nvidia.com/gpu": 2.0}}


@pytest.mark.parametrize(
    ("trainer", "policy", "expected"),
    [
        pytest.param(
            {"resourcesPerNode": GANG_NODE_RESOURCES},
            {"scheduleTimeoutSeconds": 120},
            # Two initializers (500m, 512Mi each) and one node (4 CPUs, 16Gi). The node's 2 GPUs
            # are only limits, in the runtime and the TrainJob alike, so they are not requested
            # (upstream sums the undefaulted template).
            {
                "minMember": 3,
                "minResources": {"cpu": "5", "memory": "17Gi"},
                "scheduleTimeoutSeconds": 120,
            },
            id="the PodGroup sums the requests of every pod set",
        ),
        pytest.param(
            {"resourcesPerNode": SDK_GPUS},
            {},
            # The official SDK sends resourcesPerNode with requests == limits.
            {
                "minMember": 3,
                "minResources": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
                "scheduleTimeoutSeconds": 60,
            },
            id="GPUs count when the TrainJob requests them as the SDK does",
        ),
        pytest.param(
            {},
            {},
            {
                "minMember": 3,
                "minResources": {"cpu": "1", "memory": "1Gi"},
                "scheduleTimeoutSeconds": 60,
            },
            id="the schedule timeout defaults to sixty seconds",
        ),
        pytest.param(
            {"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "1"}}},
            {},
            # Two initializers (one pod each) and four nodes of 1 CPU.
            {
                "minMember": 6,
                "minResources": {"cpu": "5", "memory": "1Gi"},
                "scheduleTimeoutSeconds": 60,
            },
            id="the pod count follows the trainer's numNodes",
        ),
    ],
)
def test_pod_group_spec(trainer: dict[str, Any], policy: dict[str, Any], expected: Any) -> None:
    objs = gang_objects(gang_trainjob(**trainer), gang_runtime({"coscheduling": policy}))
    assert objs[("PodGroup", "tune")]["spec"] == expected


def test_the_pod_group_is_owned_by_the_trainjob_and_joined_by_every_pod() -> None:
    objs = gang_objects(gang_trainjob(), gang_runtime({"coscheduling": {}}))
    group = objs[("PodGroup", "tune")]
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["namespace"] == "ml"
    assert group["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    for rjob in objs[("JobSet", "tune")]["spec"]["replicatedJobs"]:
        assert rjob["template"]["spec"]["template"]["metadata"]["labels"] == {
            "scheduling.x-k8s.io/pod-group": "tune"
        }


@pytest.mark.parametrize(("suspend", "applied"), POD_GROUP_REAPPLIED)
def test_pod_group_is_reapplied_only_while_suspended(suspend: bool, applied: bool) -> None:
    assert (
        pod_group_reapplied({"coscheduling": {}}, "scheduling.x-k8s.io/v1alpha1", suspend=suspend)
        is applied
    )


@pytest.mark.parametrize(
    ("runtime_spec", "expected"),
    [
        pytest.param(
            {"podGroupPolicy": {"coscheduling": {}}},
            [ObjectRef("scheduling.x-k8s.io/v1alpha1", "PodGroup", "job")],
            id="a coscheduling runtime reads back its PodGroup",
        ),
        pytest.param(
            {"mlPolicy": {"torch": {}}},
            [],
            id="a runtime without a PodGroup policy reads back nothing",
        ),
    ],
)
def test_objects_read_back(runtime_spec: dict[str, Any], expected: list[ObjectRef]) -> None:
    job = {"metadata": {"name": "job", "namespace": "ns"}}
    assert existing_refs(job, {"spec": runtime_spec}) == expected
