"""Coscheduling and Volcano PodGroups (trainer v2.3.0 pkg/runtime/framework/plugins/coscheduling/) and Volcano's admission checks (trainer v2.3.0 pkg/webhooks/)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.errors import FieldError
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import new_runtime_info
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.framework import Existing, ValidationContext
from kubetrain.runtime.plugins.volcano import Volcano
from kubetrain.runtime.render import render

GATES = FeatureGates.upstream_defaults()
ENV = Environment()


def torchtune(policy: dict[str, Any]) -> dict[str, Any]:
    rt = next(r for r in default_runtimes() if r["metadata"]["name"] == "torchtune-llama3.2-1b")
    rt["spec"]["podGroupPolicy"] = policy
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    for job in jobs[:2]:  # the initializers ask for a little each
        job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "500m", "memory": "512Mi"}
        }
    return rt


def pod_spec(runtime: dict[str, Any], job: str) -> dict[str, Any]:
    rjob = next(
        j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == job
    )
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def trainjob(suspend: bool = False, **trainer: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "tune", "namespace": "ml", "uid": "u-1"},
        "spec": {
            "runtimeRef": {"name": "torchtune-llama3.2-1b"},
            "suspend": suspend,
            "trainer": trainer,
        },
    }


def rendered(
    job: dict[str, Any], runtime: dict[str, Any], existing: Existing | None = None
) -> dict[tuple[str, str], Any]:
    plan = render(job, runtime, gates=GATES, environment=ENV, existing=existing)
    return {(o["kind"], o["metadata"]["name"]): o for o in plan.objects}


NODE_RESOURCES = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 2}}


def test_coscheduling_pod_group_sums_every_pod_set() -> None:
    objs = rendered(
        trainjob(resourcesPerNode=NODE_RESOURCES),
        torchtune({"coscheduling": {"scheduleTimeoutSeconds": 120}}),
    )
    group = objs[("PodGroup", "tune")]
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["namespace"] == "ml"
    assert group["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    # Two initializers (500m, 512Mi each) and one node (4 CPUs, 16Gi). The node's 2 GPUs are
    # only limits, in the runtime and the TrainJob alike, so they are not requested (upstream
    # sums the undefaulted template).
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "5", "memory": "17Gi"},
        "scheduleTimeoutSeconds": 120,
    }
    for rjob in objs[("JobSet", "tune")]["spec"]["replicatedJobs"]:
        assert rjob["template"]["spec"]["template"]["metadata"]["labels"] == {
            "scheduling.x-k8s.io/pod-group": "tune"
        }


def test_gpus_count_when_the_trainjob_requests_them_as_the_sdk_does() -> None:
    # The official SDK sends resourcesPerNode with requests == limits.
    gpus = {"requests": {"nvidia.com/gpu": 2.0}, "limits": {"nvidia.com/gpu": 2.0}}
    objs = rendered(trainjob(resourcesPerNode=gpus), torchtune({"coscheduling": {}}))
    assert objs[("PodGroup", "tune")]["spec"]["minResources"] == {
        "cpu": "1",
        "memory": "1Gi",
        "nvidia.com/gpu": "2",
    }


def test_coscheduling_timeout_defaults_to_sixty_seconds() -> None:
    objs = rendered(trainjob(), torchtune({"coscheduling": {}}))
    assert objs[("PodGroup", "tune")]["spec"]["scheduleTimeoutSeconds"] == 60


def test_the_pod_count_follows_the_trainers_num_nodes() -> None:
    objs = rendered(
        trainjob(numNodes=4, resourcesPerNode={"requests": {"cpu": "1"}}),
        torchtune({"coscheduling": {}}),
    )
    # Two initializers (one pod each) and four nodes of 1 CPU.
    assert objs[("PodGroup", "tune")]["spec"]["minMember"] == 6
    assert objs[("PodGroup", "tune")]["spec"]["minResources"]["cpu"] == "5"


@pytest.mark.parametrize(
    ("suspend", "applied"),
    [(False, False), (True, True)],
    ids=[
        "an existing PodGroup is left alone while the job runs",
        "a suspended job re-applies its PodGroup",
    ],
)
def test_pod_group_is_reapplied_only_while_suspended(suspend: bool, applied: bool) -> None:
    existing = Existing.of(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "tune"},
        }
    )
    for policy in ({"coscheduling": {}}, {"volcano": {}}):
        objs = rendered(trainjob(suspend=suspend), torchtune(policy), existing)
        assert (("PodGroup", "tune") in objs) is applied


def test_volcano_pod_group_with_queue_priority_and_topology() -> None:
    runtime = torchtune({"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}})
    runtime["spec"]["template"]["metadata"] = {
        "annotations": {"scheduling.volcano.sh/queue-name": "research"}
    }
    pod_spec(runtime, "model-initializer")["priorityClassName"] = "low"
    pod_spec(runtime, "node")["priorityClassName"] = "high"
    objs = rendered(trainjob(resourcesPerNode=NODE_RESOURCES), runtime)
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
    job = trainjob()
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
    objs = rendered(job, torchtune({"volcano": {}}))
    assert objs[("PodGroup", "tune")]["spec"]["queue"] == "q2"
    assert (
        "queue"
        not in rendered(trainjob(), torchtune({"volcano": {}}))[("PodGroup", "tune")]["spec"]
    )


def _validate(runtime: dict[str, Any], priority_classes: frozenset[str] | None) -> list[FieldError]:
    job = trainjob()
    info = new_runtime_info(job, runtime, ENV)
    return Volcano().validate(
        info, job, ValidationContext(gates=GATES, priority_classes=priority_classes)
    )


def test_an_empty_volcano_queue_is_rejected() -> None:
    runtime = torchtune({"volcano": {}})
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
    runtime = torchtune({"volcano": {}})
    for job, name in zip(["dataset-initializer", "node"], names, strict=False):
        pod_spec(runtime, job)["priorityClassName"] = name
    expected = [
        FieldError(
            "spec.templateSpec.priorityClassName",
            f'PriorityClass "{n}" doesn\'t exist: priorityclasses.scheduling.k8s.io "{n}" not found',
        )
        for n in missing
    ]
    assert _validate(runtime, frozenset(known)) == expected


def test_priority_classes_are_not_checked_without_cluster_data() -> None:
    runtime = torchtune({"volcano": {}})
    pod_spec(runtime, "node")["priorityClassName"] = "anything"
    assert _validate(runtime, None) == []
