"""The SDK's public names are pinned, resolve, and cost nothing to import."""

from __future__ import annotations

import subprocess
import sys

import kubetrain.client as client

PUBLIC = {
    "ActiveDeadlineSeconds", "Annotations", "BuiltinTrainer", "ClientError", "Connection",
    "CustomTrainer", "CustomTrainerContainer", "Event", "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer", "Initializer", "JobClient", "KubernetesBackendConfig", "Labels",
    "LocalBackendConfig", "Name", "NotFoundError", "Runtime", "S3DatasetInitializer",
    "S3ModelInitializer", "Step", "TorchTuneConfig", "TrainJob", "TrainerArgs", "TrainerClient", "OptimizerClient",
    "TrainerCommand", "connect",
}  # fmt: skip


def test_the_public_names_are_pinned_and_resolve() -> None:
    assert set(client.__all__) == PUBLIC
    assert all(getattr(client, name) is not None for name in PUBLIC)


def test_importing_the_client_loads_no_kubernetes_client() -> None:
    code = "import sys, kubetrain.client; print(sorted(m for m in ('lightkube', 'httpx2', 'yaml', 'rich') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
