"""What the security suite's tests share: resources, the framework-less runtime, TrainJobs."""

from __future__ import annotations

from typing import Any

# A runtime with no framework: no ports, so these jobs never queue behind other torch jobs.
RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainingRuntime",
    "metadata": {"name": "plain", "namespace": "default"},
    "spec": {
        "mlPolicy": {"numNodes": 1},
        "template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                # A failing command fails the job at once: no restarts to wait through.
                "spec": {"backoffLimit": 0, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "node", "image": "python"}],
                }}},
            },
        }]}},
    },
}  # fmt: skip


def trainjob(name: str, code: str, **env: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "plain", "kind": "TrainingRuntime"},
            "trainer": {
                "command": ["python", "-c", code],
                "env": [{"name": k, "value": v} for k, v in {"TRAINJOB_NAME": name, **env}.items()],
            },
        },
    }
