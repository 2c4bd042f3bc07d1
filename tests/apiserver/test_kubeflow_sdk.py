"""The official Kubeflow SDK (``kubeflow`` 0.5.0) against the server alone, no controller:
every call it makes (reference kubeflow/sdk 0.5.0 kubeflow/trainer/backends/kubernetes/backend.py) gets an answer its pydantic models accept."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from apiserver_support import TRAINER, Cluster

# The SDK's own models use pydantic's deprecated class-based config; that is not ours to fix.


@pytest.fixture
def runtimes(custom: Any) -> Iterator[list[str]]:
    from kubernetes.client import ApiException

    from kubetrain.runtime.defaults import default_runtimes

    made = []
    for runtime in default_runtimes():
        body = copy.deepcopy(runtime)
        try:
            custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", body)
            made.append(body["metadata"]["name"])
        except ApiException as exc:
            if exc.status != 409:
                raise
    yield [r["metadata"]["name"] for r in default_runtimes()]
    for name in made:
        custom.delete_cluster_custom_object(*TRAINER, "clustertrainingruntimes", name)


def _train() -> None:  # the function the SDK ships to the pods (never run here)
    print("hello")


def test_list_runtimes_train_get_list_and_delete(
    cluster: Cluster, ns: str, runtimes: list[str]
) -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    sdk = TrainerClient(KubernetesBackendConfig(namespace=ns, config_file=str(cluster.kubeconfig)))
    names = {r.name for r in sdk.list_runtimes()}
    assert "torch-distributed" in names
    job = sdk.train(
        runtime=sdk.get_runtime("torch-distributed"),
        trainer=CustomTrainer(func=_train, num_nodes=2),
    )
    got = sdk.get_job(job)
    assert (got.name, got.status, got.num_nodes) == (job, "Created", 2)
    assert [j.name for j in sdk.list_jobs()] == [job]
    sdk.delete_job(job)
    assert sdk.list_jobs() == []
