"""The official Kubeflow SDK and kubectl, unchanged, against the local engine (issue 8).

The daemon's kubeconfig is what ``kubetrain serve --kubeconfig PATH`` writes: context
``kubetrain-local``, a bearer token, the server's CA. The SDK gets it through
``KubernetesBackendConfig(config_file=...)``, kubectl through ``--kubeconfig``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def allreduce_ranks(scale: int, label: str = "sum") -> None:
    """Run by torchrun on every node: one all-reduce across both pods."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1) * scale])
    dist.all_reduce(total)
    print(f"{label} over {dist.get_world_size()} ranks = {total.item():.0f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from kubetrain.local.daemon import ensure_daemon, stop_daemon

    home = tmp_path_factory.mktemp("compat-home")
    info = ensure_daemon(home)
    try:
        yield Path(info.kubeconfig)
    finally:
        stop_daemon(home, kill_pods=True)


def test_the_official_sdk_trains_a_function_on_two_nodes(kubeconfig: Path) -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    client = TrainerClient(
        KubernetesBackendConfig(config_file=str(kubeconfig), namespace="default")
    )
    assert "torch-distributed" in [r.name for r in client.list_runtimes()]
    name = client.train(
        trainer=CustomTrainer(
            func=allreduce_ranks, func_args={"scale": 10, "label": "total"}, num_nodes=2
        )
    )
    job = client.wait_for_job_status(name, timeout=280, polling_interval=1)
    assert (job.status, job.num_nodes) == ("Complete", 2)
    assert sorted(s.name for s in job.steps) == ["node-0", "node-1"]
    # 2 nodes x 1 process (CPU count of an unset resourcesPerNode is 1): (1 + 2) * 10 = 30.
    assert "total over 2 ranks = 30" in "".join(client.get_job_logs(name))
    assert name in [j.name for j in client.list_jobs()]
    client.delete_job(name)
    with pytest.raises(RuntimeError):
        client.get_job(name)


TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: torch-ddp
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    command:
      - python
      - -c
      - import os; print(f"node {os.environ['PET_NODE_RANK']} of {os.environ['PET_NNODES']} done")
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_lists_applies_describes_logs_and_deletes(kubeconfig: Path, tmp_path: Path) -> None:
    def kubectl(*args: str) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=300,  # above the longest --timeout given to kubectl wait below
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = kubectl("get", "trainjobs,clustertrainingruntimes")
    assert "clustertrainingruntime.trainer.kubeflow.org/torch-distributed" in listed
    # A two-node job that only prints: kubectl's verbs are under test here; the torch-ddp
    # example's training is proven by tests/sandbox, tests/daemon and tests/cli.
    job = tmp_path / "trainjob.yaml"
    job.write_text(TRAINJOB)
    assert "trainjob.trainer.kubeflow.org/torch-ddp created" in kubectl("apply", "-f", str(job))
    kubectl("wait", "--for=condition=Complete", "trainjob/torch-ddp", "--timeout=240s")
    assert "Complete" in kubectl("get", "trainjob", "torch-ddp")
    assert "AllJobsCompleted" in kubectl("describe", "trainjob", "torch-ddp")
    pod = kubectl(
        "get",
        "pods",
        "-l",
        "jobset.sigs.k8s.io/jobset-name=torch-ddp,batch.kubernetes.io/job-completion-index=0",
        "-o",
        "name",
    ).strip()
    logs = kubectl("logs", pod)
    assert "node 0 of 2 done" in logs and "node 1" not in logs
    kubectl("delete", "trainjob", "torch-ddp")
    assert "torch-ddp" not in kubectl("get", "trainjobs")
