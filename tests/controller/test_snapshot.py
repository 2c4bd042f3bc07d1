"""Reading the runtime snapshot ConfigMap: accepted only when it is this job's and its runtime's."""

from __future__ import annotations

import pytest
import yaml

from kubetrain.api.types import Obj
from kubetrain.controller.snapshot import SnapshotError, runtime_from_snapshot

RUNTIME: Obj = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}},
}
JOB: Obj = {
    "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"},
    "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}},
}


def snapshot(*, uid: str = "u-1", data: Obj | None = None) -> Obj:
    return {
        "metadata": {
            "name": "tj-runtime-snapshot",
            "ownerReferences": [{"kind": "TrainJob", "uid": uid, "controller": True}],
        },
        "data": {"runtime": yaml.safe_dump(RUNTIME)} if data is None else data,
    }


def test_a_good_snapshot_gives_back_the_runtime() -> None:
    assert runtime_from_snapshot(snapshot(), JOB) == RUNTIME


@pytest.mark.parametrize(
    ("configmap", "job", "fragment"),
    [
        (snapshot(uid="other"), JOB, "not controlled by this TrainJob"),
        (snapshot(data={}), JOB, "data key 'runtime' is missing"),
        (snapshot(data={"runtime": "a: [b"}), JOB, "invalid runtime snapshot"),
        (
            snapshot(),
            {**JOB, "spec": {"runtimeRef": {"name": "other"}}},
            "does not match runtimeRef",
        ),
        (
            snapshot(),
            {
                **JOB,
                "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "TrainingRuntime"}},
            },
            "kind 'ClusterTrainingRuntime' does not match",
        ),
    ],
    ids=[
        "a snapshot owned by another TrainJob is refused",
        "a snapshot without the runtime key is refused",
        "a snapshot that is not YAML is refused",
        "a snapshot of another runtime is refused",
        "a snapshot of another runtime kind is refused",
    ],
)
def test_bad_snapshots_are_errors(configmap: Obj, job: Obj, fragment: str) -> None:
    with pytest.raises(SnapshotError, match="invalid runtime snapshot") as info:
        runtime_from_snapshot(configmap, job)
    assert fragment in str(info.value)
