"""Katib's pod webhook, locally: what a trial's pods get (kubetrain.runtime.katib.admission)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.runtime.katib import COLLECTOR_CONTAINER, KatibAdmission

TRIAL = {
    "apiVersion": "kubeflow.org/v1beta1",
    "kind": "Trial",
    "metadata": {"name": "exp-abc", "namespace": "default", "uid": "trial-uid"},
    "spec": {
        "primaryContainerName": "node",
        "primaryPodLabels": {
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "batch.kubernetes.io/job-completion-index": "0",
        },
        "metricsCollector": {"collector": {"kind": "StdOut"}},
    },
}
JOB = {
    "metadata": {
        "name": "exp-abc",
        "namespace": "default",
        "ownerReferences": [{"kind": "Trial", "uid": "trial-uid"}],
    }
}


class Reader:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self._objs = {(o.get("kind", "TrainJob"), o["metadata"]["name"]): o for o in objs}

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        return self._objs.get((kind, name))


def pod(index: str, command: list[str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"exp-abc-node-0-{index}-x",
            "namespace": "default",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "exp-abc",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "batch.kubernetes.io/job-completion-index": index,
            },
        },
        "spec": {"containers": [{"name": "node", "command": command or ["python", "train.py"]}]},
    }


def admit(obj: dict[str, Any], *objs: dict[str, Any]) -> dict[str, Any]:
    return KatibAdmission().mutate("CREATE", copy.deepcopy(obj), None, reader=Reader(*objs))


def test_every_trial_pod_is_labelled_and_told_its_trial() -> None:
    for index in ("0", "1"):
        made = admit(pod(index), TRIAL, JOB)
        assert made["metadata"]["labels"]["katib.kubeflow.org/trial"] == "exp-abc"
        assert {"name": "KATIB_TRIAL_NAME", "value": "exp-abc"} in made["spec"]["containers"][0][
            "env"
        ]


@pytest.mark.parametrize(
    ("index", "aliased"),
    [pytest.param("0", True, id="the primary pod"), pytest.param("1", False, id="another node")],
)
def test_only_the_primary_pod_serves_the_collector_containers_log(
    index: str, aliased: bool
) -> None:
    annotations = admit(pod(index), TRIAL, JOB)["metadata"].get("annotations") or {}
    assert (
        annotations.get("kubetrain.kubeflow.org/log-aliases") == f"{COLLECTOR_CONTAINER}=node"
    ) is aliased


def test_a_pod_of_a_trainjob_no_trial_owns_is_left_alone() -> None:
    stranger = {"metadata": {"name": "exp-abc", "namespace": "default", "ownerReferences": []}}
    assert admit(pod("0"), TRIAL, stranger) == pod("0")


def test_the_file_collector_mounts_the_folder_and_prints_the_file_after_the_command() -> None:
    trial = copy.deepcopy(TRIAL)
    trial["spec"]["metricsCollector"] = {
        "collector": {"kind": "File"},
        "source": {
            "fileSystemPath": {
                "path": "/var/log/katib/metrics.log",
                "kind": "File",
                "format": "TEXT",
            }
        },
    }
    made = admit(pod("0", ["bash", "-c", "train"]), trial, JOB)
    container = made["spec"]["containers"][0]
    assert made["spec"]["volumes"] == [{"name": "metrics-volume", "emptyDir": {}}]
    assert container["volumeMounts"] == [{"name": "metrics-volume", "mountPath": "/var/log/katib"}]
    assert container["command"][:2] == ["sh", "-c"]
    assert container["command"][3:] == ["sh", "bash", "-c", "train"]
    assert (
        "exit $rc" in container["command"][2]
        and "cat /var/log/katib/metrics.log" in container["command"][2]
    )
