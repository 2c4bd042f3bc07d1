"""The official SDK's OptimizerClient (kubeflow 0.5.0), unchanged, against the local engine.

Trials run a port-free runtime (plain ``python`` on two nodes): on this engine torch trials
share port 29500 today and would queue behind each other (see docs/tuning.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# Two nodes, no mlPolicy ports: the SDK runs the function with `python` (framework not torch).
PYTHON_RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainingRuntime",
    "metadata": {
        "name": "python-nodes",
        "namespace": "default",
        "labels": {"trainer.kubeflow.org/framework": "plainml"},
    },
    "spec": {
        "mlPolicy": {"numNodes": 2},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                # A failed trial fails at once (Kubernetes' default retries 6 times).
                                "backoffLimit": 0,
                                "template": {
                                    "spec": {
                                        "containers": [{"name": "node", "image": "python:3.11"}]
                                    }
                                },
                            },
                        },
                    }
                ]
            }
        },
    },
}


def quadratic(lr: str) -> None:
    """A known function: loss is smallest at lr = 0.3."""
    import os

    loss = (float(lr) - 0.3) ** 2
    if os.environ.get("JOB_COMPLETION_INDEX", "0") == "0":
        print(f"loss={loss:.6f}", flush=True)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from kubernetes import client, config

    from kubetrain.local.daemon import ensure_daemon, stop_daemon

    home = tmp_path_factory.mktemp("katib-home")
    info = ensure_daemon(home)
    try:
        api = client.CustomObjectsApi(config.new_client_from_config(str(info.kubeconfig)))
        api.create_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainingruntimes", PYTHON_RUNTIME
        )
        yield Path(info.kubeconfig)
    finally:
        stop_daemon(home, kill_pods=True)


def test_random_search_of_six_trials_two_at_a_time_finds_the_lowest_loss(
    kubeconfig: Path,
) -> None:
    from kubeflow.optimizer import (
        KubernetesBackendConfig,
        Objective,
        OptimizerClient,
        RandomSearch,
        Search,
        TrainJobTemplate,
        TrialConfig,
    )
    from kubeflow.trainer import CustomTrainer

    client = OptimizerClient(
        KubernetesBackendConfig(config_file=str(kubeconfig), namespace="default")
    )
    started = time.monotonic()
    name = client.optimize(
        TrainJobTemplate(
            trainer=CustomTrainer(func=quadratic, num_nodes=2), runtime="python-nodes"
        ),
        trial_config=TrialConfig(num_trials=6, parallel_trials=2),
        search_space={"lr": Search.uniform(0.0, 1.0)},
        objectives=[Objective(metric="loss", direction="minimize")],
        algorithm=RandomSearch(random_state=7),
    )
    job = client.wait_for_job_status(name, timeout=200, polling_interval=1)
    elapsed = time.monotonic() - started
    assert job.status == "Complete"
    assert len(job.trials) == 6
    losses = {
        t.name: float(next(m.latest for m in t.metrics if m.name == "loss")) for t in job.trials
    }
    best = client.get_best_results(name)
    assert best is not None
    lowest = min(losses, key=losses.__getitem__)
    assert float(best.metrics[0].latest) == losses[lowest]
    assert best.parameters == next(t.parameters for t in job.trials if t.name == lowest)
    assert abs(losses[lowest] - (float(best.parameters["lr"]) - 0.3) ** 2) < 1e-5
    assert name in [j.name for j in client.list_jobs()]
    assert f"loss={losses[lowest]:.6f}" in "".join(client.get_job_logs(name))
    client.delete_job(name)
    print(f"6 trials, 2 at a time: {elapsed:.1f} s")
