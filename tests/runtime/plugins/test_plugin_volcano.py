"""Volcano plugin (trainer v2.3.0 pkg/runtime/framework/plugins/volcano/): the Volcano PodGroup
(queue, priority class, network topology), the pod annotation that joins it, its admission
checks (trainer v2.3.0 pkg/webhooks/) and the PodGroup it reads back."""

from __future__ import annotations

from typing import Any

import pytest
from plugin_runtimes import (
    ENV,
    GANG_NODE_RESOURCES,
    GATES,
    POD_GROUP_REAPPLIED,
    gang_objects,
    gang_runtime,
    gang_trainjob,
    pod_group_reapplied,
    runtime_pod_spec,
)
from runtime_helpers import error_pairs

from kubetrain.api.errors import FieldError
from kubetrain.runtime import validate_trainjob
from kubetrain.runtime.core import new_runtime_info
from kubetrain.runtime.framework import ObjectRef, ValidationContext
from kubetrain.runtime.plugins.volcano import Volcano
from kubetrain.runtime.render import existing_refs
from kubetrain.testing import make_runtime, make_trainjob


def test_volcano_pod_group_with_queue_priority_and_topology() -> None:
    runtime = gang_runtime(
        {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}}
    )
    runtime["spec"]["template"]["metadata"] = {
        "annotations": {"scheduling.volcano.sh/queue-name": "research"}
    }
    runtime_pod_spec(runtime, "model-initializer")["priorityClassName"] = "low"
    runtime_pod_spec(runtime, "node")["priorityClassName"] = "high"
    objs = gang_objects(gang_trainjob(resourcesPerNode=GANG_NODE_RESOURCES), runtime)
    group = objs[("PodGroup", "tune")]
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "5", "memory": "17Gi"},
        "queue": "research",
        "priorityClassName": "high",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
    }
    for rjob in objs[("JobSet", "tune")]["spec"]["replicatedJobs"]:
        meta = rjob["template"]["spec"]["template"]["metadata"]
        assert meta["annotations"] == {"scheduling.k8s.io/group-name": "tune"}


def test_a_runtime_patch_can_set_the_volcano_queue() -> None:
    job = gang_trainjob()
    job["spec"]["runtimePatches"] = [
        {
            "manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {
                "template": {
                    "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "q2"}}
                }
            },
        }
    ]
    objs = gang_objects(job, gang_runtime({"volcano": {}}))
    assert objs[("PodGroup", "tune")]["spec"]["queue"] == "q2"
    assert (
        "queue"
        not in gang_objects(gang_trainjob(), gang_runtime({"volcano": {}}))[("PodGroup", "tune")][
            "spec"
        ]
    )


def _validate(runtime: dict[str, Any], priority_classes: frozenset[str] | None) -> list[FieldError]:
    job = gang_trainjob()
    info = new_runtime_info(job, runtime, ENV)
    return Volcano().validate(
        info, job, ValidationContext(gates=GATES, priority_classes=priority_classes)
    )


def test_an_empty_volcano_queue_is_rejected() -> None:
    runtime = gang_runtime({"volcano": {}})
    runtime["spec"]["template"]["metadata"] = {
        "annotations": {"scheduling.volcano.sh/queue-name": ""}
    }
    assert _validate(runtime, frozenset()) == [
        FieldError(
            "spec.annotations[scheduling.volcano.sh/queue-name]",
            "Volcano queue name must not be empty",
        )
    ]


@pytest.mark.parametrize(
    ("names", "known", "missing"),
    [
        (["high"], {"high"}, []),
        (["high"], set(), ["high"]),
        (["system-node-critical", "nope"], set(), []),
        (["nope", "system-cluster-critical"], set(), ["nope"]),
    ],
    ids=[
        "an existing PriorityClass passes",
        "a missing PriorityClass is rejected",
        "a system class first ends the check, as upstream returns early",
        "a missing class before a system class is still reported",
    ],
)
def test_priority_classes_must_exist(names: list[str], known: set[str], missing: list[str]) -> None:
    runtime = gang_runtime({"volcano": {}})
    for job, name in zip(["dataset-initializer", "node"], names, strict=False):
        runtime_pod_spec(runtime, job)["priorityClassName"] = name
    expected = [
        FieldError(
            "spec.templateSpec.priorityClassName",
            f'PriorityClass "{n}" doesn\'t exist: priorityclasses.scheduling.k8s.io "{n}" not found',
        )
        for n in missing
    ]
    assert _validate(runtime, frozenset(known)) == expected


def test_priority_classes_are_not_checked_without_cluster_data() -> None:
    runtime = gang_runtime({"volcano": {}})
    runtime_pod_spec(runtime, "node")["priorityClassName"] = "anything"
    assert _validate(runtime, None) == []


@pytest.mark.parametrize(("suspend", "applied"), POD_GROUP_REAPPLIED)
def test_pod_group_is_reapplied_only_while_suspended(suspend: bool, applied: bool) -> None:
    assert (
        pod_group_reapplied({"volcano": {}}, "scheduling.volcano.sh/v1beta1", suspend=suspend)
        is applied
    )


def volcano_runtime(queue: str | None, priority: str | None) -> dict[str, Any]:
    builder = make_runtime("v").torch().pod_group("volcano")
    if queue is not None:
        builder = builder.template_metadata(annotations={"scheduling.volcano.sh/queue-name": queue})
    rt = builder.job("node", ancestor="trainer").obj()
    if priority is not None:
        rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "priorityClassName"
        ] = priority
    return rt


@pytest.mark.parametrize(
    ("runtime", "kwargs", "expected"),
    [
        pytest.param(
            volcano_runtime("", None),
            {},
            [
                (
                    "spec.annotations[scheduling.volcano.sh/queue-name]",
                    "Volcano queue name must not be empty",
                )
            ],
            id="the queue annotation must not be empty",
        ),
        pytest.param(
            volcano_runtime("q", "gold"),
            {"priority_classes": ["silver"]},
            [
                (
                    "spec.templateSpec.priorityClassName",
                    'PriorityClass "gold" doesn\'t exist: priorityclasses.scheduling.k8s.io "gold" not found',
                )
            ],
            id="the priority class must exist",
        ),
        pytest.param(
            volcano_runtime("q", "gold"),
            {},
            [],
            id="the priority class is not checked when the classes are unknown",
        ),
    ],
)
def test_admission_through_validate_trainjob(
    runtime: dict[str, Any], kwargs: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    job = make_trainjob().runtime("v").obj()
    assert error_pairs(validate_trainjob(job, runtime, **kwargs).errors) == expected


@pytest.mark.parametrize(
    ("runtime_spec", "expected"),
    [
        pytest.param(
            {"podGroupPolicy": {"volcano": {}}},
            [ObjectRef("scheduling.volcano.sh/v1beta1", "PodGroup", "job")],
            id="a Volcano runtime reads back its PodGroup",
        ),
        pytest.param(
            {"podGroupPolicy": {"volcano": {}}, "mlPolicy": {"mpi": {}}},
            [
                ObjectRef("v1", "Secret", "job-mpi-ssh-auth"),
                ObjectRef("scheduling.volcano.sh/v1beta1", "PodGroup", "job"),
            ],
            id="with MPI it reads back after the MPI Secret, in plugin order",
        ),
    ],
)
def test_objects_read_back(runtime_spec: dict[str, Any], expected: list[ObjectRef]) -> None:
    job = {"metadata": {"name": "job", "namespace": "ns"}}
    assert existing_refs(job, {"spec": runtime_spec}) == expected
