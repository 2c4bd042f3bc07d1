"""Runtimes and small render helpers shared by the per-plugin tests (imported by name: this
folder is on sys.path under pytest)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.framework import Existing
from kubetrain.runtime.render import render

GATES = FeatureGates.upstream_defaults()
ENV = Environment()


def flux_runtime(**node: Any) -> dict[str, Any]:
    """A one-node Flux runtime; ``node`` overrides fields of its container."""
    container = {"name": "node", "image": "ubuntu:jammy", "command": ["lmp"], **node}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": "flux-distributed",
            "labels": {"trainer.kubeflow.org/framework": "flux"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "flux": {"numProcPerNode": 1}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": {"spec": {"containers": [container]}}},
                            },
                        }
                    ]
                }
            },
        },
    }


# --- gang scheduling: torchtune with a PodGroup policy -----------------------------------------


def gang_runtime(policy: dict[str, Any]) -> dict[str, Any]:
    """kubetrain's torchtune runtime with this ``podGroupPolicy``; initializers request a little."""
    rt = next(r for r in default_runtimes() if r["metadata"]["name"] == "torchtune-llama3.2-1b")
    rt["spec"]["podGroupPolicy"] = policy
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    for job in jobs[:2]:  # the initializers ask for a little each
        job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "500m", "memory": "512Mi"}
        }
    return rt


def runtime_pod_spec(runtime: dict[str, Any], job: str) -> dict[str, Any]:
    """The pod spec of replicatedJob ``job`` of a runtime (to edit it)."""
    rjob = next(
        j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == job
    )
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def gang_trainjob(suspend: bool = False, **trainer: Any) -> dict[str, Any]:
    """TrainJob ``ml/tune`` of the gang runtime."""
    return {
        "metadata": {"name": "tune", "namespace": "ml", "uid": "u-1"},
        "spec": {
            "runtimeRef": {"name": "torchtune-llama3.2-1b"},
            "suspend": suspend,
            "trainer": trainer,
        },
    }


def gang_objects(
    job: dict[str, Any], runtime: dict[str, Any], existing: Existing | None = None
) -> dict[tuple[str, str], Any]:
    """The rendered objects by ``(kind, name)``."""
    plan = render(job, runtime, gates=GATES, environment=ENV, existing=existing)
    return {(o["kind"], o["metadata"]["name"]): o for o in plan.objects}


# Both gang plugins apply the PodGroup they find existing again only while the job is suspended.
POD_GROUP_REAPPLIED = [
    pytest.param(False, False, id="an existing PodGroup is left alone while the job runs"),
    pytest.param(True, True, id="a suspended job re-applies its PodGroup"),
]


def pod_group_reapplied(policy: dict[str, Any], api_version: str, *, suspend: bool) -> bool:
    """Whether rendering TrainJob ``tune`` on the gang ``policy`` applies its existing PodGroup
    (of ``api_version``) again."""
    existing = Existing.of(
        {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": "tune"}}
    )
    objs = gang_objects(gang_trainjob(suspend=suspend), gang_runtime(policy), existing)
    return ("PodGroup", "tune") in objs


GANG_NODE_RESOURCES = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": 2}}
