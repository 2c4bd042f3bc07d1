"""Legacy YAML runs: ``kubetrain run -f <v1 job>`` converts (env shim on), prints the report and
trains on the local engine. A probe in every pod reads only v1's env and writes what it saw;
the test compares that with v1's contract for the pod's rank (reference §2.1-§2.4).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemons import module_daemon

PROBE = Path(__file__).parent / "e2e" / "probe.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # v1 examples share a work directory through a hostPath volume: allowed here by name.
    allowed = f"allowedHostPaths: [{tmp_path_factory.getbasetemp()}]\n"
    yield from module_daemon(tmp_path_factory, engine_yaml=allowed)


def v1_job(
    kind: str,
    specs: str,
    container: str,
    roles: dict[str, int],
    work: Path,
    keys: str,
    mode: str = "env",
) -> str:
    role_yaml = "".join(
        f"""\
    {role}:
      replicas: {n}
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: {container}
            image: python:3.12
            command: [python, /probe/probe.py, "{keys}", {mode}]
            volumeMounts: [{{name: work, mountPath: /probe}}]
          volumes: [{{name: work, hostPath: {{path: "{work}", type: Directory}}}}]
"""
        for role, n in roles.items()
    )
    return f"apiVersion: kubeflow.org/v1\nkind: {kind}\nmetadata: {{name: {kind.lower()}-e2e}}\nspec:\n  {specs}:\n{role_yaml}"


def run(home: Path, tmp_path: Path, text: str) -> tuple[str, dict[str, dict[str, Any]]]:
    work = tmp_path / "work"
    path = tmp_path / "job.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(path), "-q"],
        env={**os.environ, "KUBETRAIN_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stderr
    seen = {p.stem: json.loads(p.read_text()) for p in work.glob("*.json")}
    return proc.stderr, seen


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    shutil.copy(PROBE, tmp_path / "work" / "probe.py")
    return tmp_path / "work"


def test_a_v1_pytorchjob_without_torchrun_trains_as_one_distributed_job(
    home: Path, tmp_path: Path, work: Path
) -> None:
    text = v1_job("PyTorchJob", "pytorchReplicaSpecs", "pytorch", {"Master": 1, "Worker": 1}, work,
                  "MASTER_ADDR,MASTER_PORT,WORLD_SIZE,RANK", "torch")  # fmt: skip
    err, seen = run(home, tmp_path, text)
    assert (
        "PyTorchJob pytorchjob-e2e -> TrainJob pytorchjob-e2e on ClusterTrainingRuntime torch-distributed"
        in err
    )
    tj = "pytorchjob-e2e"
    assert sorted(seen) == [f"{tj}-node-0-0", f"{tj}-node-0-1"]
    for rank in (
        0,
        1,
    ):  # v1: Master RANK 0, Worker 0 RANK 1, WORLD_SIZE 2, MASTER_ADDR = rank 0's pod
        got = seen[f"{tj}-node-0-{rank}"]
        assert (got["RANK"], got["WORLD_SIZE"], got["MASTER_ADDR"]) == (
            str(rank),
            "2",
            f"{tj}-node-0-0.{tj}",
        )
        # One process group: each rank's all-reduce saw both ranks (1 + 2).
        assert (got["rank"], got["world"], got["sum"]) == (rank, 2, 3.0)


def test_a_v1_tfjob_sees_v1s_tf_config(home: Path, tmp_path: Path, work: Path) -> None:
    text = v1_job(
        "TFJob",
        "tfReplicaSpecs",
        "tensorflow",
        {"Chief": 1, "PS": 1, "Worker": 2},
        work,
        "TF_CONFIG",
        "tf",
    )
    # The chief decides (v1's rule): the TrainJob completes when it does, and it has reached
    # every other task (each wrote its report first); PS and workers serve until deleted.
    _, seen = run(home, tmp_path, text)
    tj = "tfjob-e2e"
    pods = {"chief": 1, "ps": 1, "node": 2}  # the workers' job is the trainer job, node
    expected = sorted(f"{tj}-{j}-0-{i}" for j, n in pods.items() for i in range(n))
    assert sorted(seen) == expected
    roles = {"chief": "chief", "ps": "ps", "node": "worker"}
    cluster = {roles[j]: [f"{tj}-{j}-0-{i}.{tj}:2222" for i in range(n)] for j, n in pods.items()}
    for host, got in seen.items():
        job, index = host.removeprefix(f"{tj}-").split("-0-")
        role = roles[job]
        config = json.loads(got["TF_CONFIG"])
        assert config == {
            "cluster": cluster,
            "task": {"type": role, "index": int(index)},
            "environment": "cloud",
        }
        # Every address in the cluster spec is a pod of this job, and the chief reached each.
        assert {a.split(".")[0] for v in config["cluster"].values() for a in v} == set(seen)
    chief = seen[f"{tj}-chief-0-0"]
    assert chief["reached"] == sorted(a for r, v in cluster.items() if r != "chief" for a in v)


def test_a_v1_xgboostjob_trains_as_one_rabit_group_from_v1s_env(
    home: Path, tmp_path: Path, work: Path
) -> None:
    keys = "MASTER_ADDR,MASTER_PORT,WORLD_SIZE,RANK,WORKER_ADDRS,WORKER_PORT"
    text = v1_job(
        "XGBoostJob",
        "xgbReplicaSpecs",
        "xgboost",
        {"Master": 1, "Worker": 1},
        work,
        keys,
        "xgboost",
    )
    _, seen = run(home, tmp_path, text)
    tj = "xgboostjob-e2e"
    for rank in (0, 1):  # v1: Master RANK 0, Worker 0 RANK 1; the Master's xgboostjob-port
        got = seen[f"{tj}-node-0-{rank}"]
        assert {k: got[k] for k in keys.split(",")} == {
            "MASTER_ADDR": f"{tj}-node-0-0.{tj}", "MASTER_PORT": "9999", "WORLD_SIZE": "2", "RANK": str(rank),
            "WORKER_ADDRS": f"{tj}-node-0-1.{tj}", "WORKER_PORT": "9999",
        }  # fmt: skip
        assert (got["rank"], got["world"], got["sum"]) == (rank, 2, 3.0)


def test_a_v1_jaxjob_trains_as_one_jax_cluster_from_v1s_env(
    home: Path, tmp_path: Path, work: Path
) -> None:
    keys = "COORDINATOR_ADDRESS,COORDINATOR_PORT,NUM_PROCESSES,PROCESS_ID"
    text = v1_job("JAXJob", "jaxReplicaSpecs", "jax", {"Worker": 2}, work, keys, "jax")
    _, seen = run(home, tmp_path, text)
    tj = "jaxjob-e2e"
    for i in (0, 1):  # v1: worker 0 coordinates; PROCESS_ID = replica index
        got = seen[f"{tj}-node-0-{i}"]
        assert {k: got[k] for k in keys.split(",")} == {
            "COORDINATOR_ADDRESS": f"{tj}-node-0-0.{tj}", "COORDINATOR_PORT": "29500", "NUM_PROCESSES": "2",
            "PROCESS_ID": str(i),
        }  # fmt: skip
        assert (got["rank"], got["world"], got["sum"]) == (i, 2, 3.0)
