"""The SDK flow with initializers, end to end on the local engine: the official Kubeflow SDK
(``KubernetesBackendConfig`` on the daemon's kubeconfig, as against ``kubetrain serve``) and
kubetrain's own ``TrainerClient`` each train a function whose TrainJob fetches a dataset and a
model from S3 first; the function sees the files."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from initializers_support import EXAMPLE

from kubetrain.kube.client import connect
from kubetrain.kube.kinds import CLUSTER_TRAINING_RUNTIME
from kubetrain.local.daemon import ensure_daemon, stop_daemon
from kubetrain.local.sandbox import sandbox_mode
from kubetrain.testing.s3 import S3Server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox_mode().mode != "bwrap", reason="needs bubblewrap"),
]

RUNTIME = "torch-with-initializers"
DATASET_URI = "s3://kubetrain-examples/initializers/dataset"
MODEL_URI = "s3://kubetrain-examples/initializers/model"


def show_workspace() -> None:
    """Run on the node: what the initializers left in the shared volume."""
    import os

    for where in ("/workspace/dataset", "/workspace/model"):
        names = sorted(n for n in os.listdir(where) if not n.startswith("."))
        print(f"{where}: {' '.join(names)}", flush=True)


EXPECTED = (
    "/workspace/dataset: part-0000.parquet part-0001.parquet part-0002.parquet part-0003.parquet",
    "/workspace/model: config.json model.safetensors",
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A daemon whose cluster holds the example's runtime as a ClusterTrainingRuntime (the
    official SDK looks runtimes up cluster-wide)."""
    home = tmp_path_factory.mktemp("sdk") / "home"
    runtime: dict[str, Any] = yaml.safe_load((EXAMPLE / "runtime.yaml").read_text())
    runtime["kind"] = "ClusterTrainingRuntime"
    runtime["metadata"] = {"name": RUNTIME, "labels": runtime["metadata"]["labels"]}
    runtime["spec"]["mlPolicy"]["numNodes"] = 1

    async def create() -> None:
        info = await asyncio.to_thread(ensure_daemon, home)
        api = connect(info.kubeconfig)
        try:
            await api.create(
                CLUSTER_TRAINING_RUNTIME.api_version, CLUSTER_TRAINING_RUNTIME.plural, runtime
            )
        finally:
            await api.close()

    try:
        asyncio.run(create())
        yield home
    finally:
        stop_daemon(home, kill_pods=True, timeout=10)


def test_the_official_sdk_trains_after_s3_initializers(home: Path, example_data: S3Server) -> None:
    from kubeflow.trainer import (
        CustomTrainer,
        Initializer,
        KubernetesBackendConfig,
        S3DatasetInitializer,
        S3ModelInitializer,
        TrainerClient,
    )

    from kubetrain.local.daemon import ensure_daemon

    s3 = example_data
    creds = {
        "endpoint": s3.pod_endpoint,
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
    }
    kubeconfig = ensure_daemon(home).kubeconfig
    client = TrainerClient(
        KubernetesBackendConfig(config_file=str(kubeconfig), namespace="default")
    )
    name = client.train(
        runtime=client.get_runtime(RUNTIME),
        initializer=Initializer(
            dataset=S3DatasetInitializer(storage_uri=DATASET_URI, **creds),
            model=S3ModelInitializer(storage_uri=MODEL_URI, **creds),
        ),
        trainer=CustomTrainer(func=show_workspace),
    )
    job = client.wait_for_job_status(name, timeout=240, polling_interval=1)
    assert job.status == "Complete"
    steps = {s.name for s in job.steps}
    assert {"dataset-initializer", "model-initializer", "node-0"} <= steps, steps
    logs = "".join(client.get_job_logs(name))
    for line in EXPECTED:
        assert line in logs, logs


def test_kubetrains_own_client_does_the_same_on_the_local_engine(
    home: Path, example_data: S3Server
) -> None:
    from kubetrain import CustomTrainer, Initializer, LocalBackendConfig, TrainerClient
    from kubetrain.client import S3DatasetInitializer, S3ModelInitializer

    s3 = example_data
    creds = {
        "endpoint": s3.pod_endpoint,
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
    }
    with TrainerClient(LocalBackendConfig(home=str(home))) as client:
        name = client.train(
            runtime=RUNTIME,
            initializer=Initializer(
                dataset=S3DatasetInitializer(storage_uri=DATASET_URI, **creds),
                model=S3ModelInitializer(storage_uri=MODEL_URI, **creds),
            ),
            trainer=CustomTrainer(func=show_workspace),
        )
        job = client.wait_for_job_status(name, timeout=240, polling_interval=1)
        assert job.status == "Complete"
        logs = "".join(client.get_job_logs(name))
    for line in EXPECTED:
        assert line in logs, logs
