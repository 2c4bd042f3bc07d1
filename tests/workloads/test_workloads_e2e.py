"""Issue 21: Deployments, ReplicaSets and Services on the local engine, driven by kubectl.

A Deployment of a small HTTP server (a Python image, which the engine maps to a local Python
environment; ``args`` only, so they are the command) behind a Service: ``kubectl rollout
status`` waits for it, ``kubectl get deploy,rs,pods`` shows it, a TrainJob's pod reaches it by
the Service's name, a new image rolls out, ``kubectl scale`` scales it, and deleting the
Deployment takes its ReplicaSets and pods with it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: server
        image: python:3.12-slim
        args: [python, -m, http.server, "8080"]
        ports: [{containerPort: 8080, name: http}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 8080, targetPort: http}]
"""

CLIENT = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: client
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 1
    command:
    - python
    - -c
    - "import urllib.request as u; print('web answered', u.urlopen('http://web:8080/', timeout=10).status)"
"""


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from kubetrain.local.daemon import ensure_daemon, stop_daemon

    home = tmp_path_factory.mktemp("workloads-home")
    info = ensure_daemon(home)
    try:
        yield Path(info.kubeconfig)
    finally:
        stop_daemon(home, kill_pods=True)


@pytest.fixture
def kubectl(kubeconfig: Path) -> Callable[..., str]:
    """``kubectl`` on the daemon; its stdout, once it succeeded."""

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), *args],
            capture_output=True, text=True, timeout=150, input=stdin,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def test_a_deployment_behind_a_service_rolls_out_serves_a_trainjob_and_goes(
    kubectl: Callable[..., str], tmp_path: Path
) -> None:
    kubectl("apply", "-f", "-", stdin=MANIFEST)
    assert 'deployment "web" successfully rolled out' in kubectl(
        "rollout", "status", "deployment/web", "--timeout=120s"
    )
    listed = kubectl("get", "deploy,rs,pods", "-l", "app=web").splitlines()
    deploy = next(line.split() for line in listed if line.startswith("deployment.apps/web "))
    assert deploy[1:4] == ["2/2", "2", "2"]
    (rs,) = [line.split() for line in listed if line.startswith("replicaset.apps/web-")]
    assert rs[1:4] == ["2", "2", "2"]
    pods = [line.split() for line in listed if line.startswith("pod/web-")]
    assert [(p[1], p[2]) for p in pods] == [("1/1", "Running")] * 2
    endpoints = kubectl("get", "endpoints", "web", "-o", "jsonpath={.subsets[*].addresses[*].ip}")
    assert len(endpoints.split()) == 2

    # A TrainJob's pod reaches the Deployment's pods by the Service's name.
    kubectl("apply", "-f", "-", stdin=CLIENT)
    kubectl("wait", "--for=condition=Complete", "trainjob/client", "--timeout=120s")
    logs = kubectl("logs", "-l", "jobset.sigs.k8s.io/jobset-name=client")
    assert "web answered 200" in logs

    # A new image rolls out to a second ReplicaSet at revision 2; the first keeps none.
    kubectl("set", "image", "deployment/web", "server=python:3.13-slim")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    sets = kubectl(
        "get", "rs", "-l", "app=web", "-o",
        "jsonpath={range .items[*]}{.metadata.annotations.deployment\\.kubernetes\\.io/revision}"
        "={.spec.replicas} {end}",
    )  # fmt: skip
    assert sorted(sets.split()) == ["1=0", "2=2"]

    kubectl("scale", "deployment/web", "--replicas=1")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s")
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.status.replicas}") == "1"

    kubectl("delete", "deployment", "web")
    deadline = time.monotonic() + 60
    while kubectl("get", "rs,pods", "-l", "app=web", "-o", "name").strip():
        assert time.monotonic() < deadline, "the Deployment's ReplicaSets and pods stayed"
        time.sleep(0.2)


JOB_AND_STATEFULSET = """
apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: python:3.12
        command: [python, -c, "import os; print('index', os.environ['JOB_COMPLETION_INDEX'])"]
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  clusterIP: None
  selector: {app: db}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 2
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: c
        image: python:3.12
        command:
        - python
        - -c
        - |
          import socket, time
          print("peer", socket.gethostbyname("db-0.db"), flush=True)
          time.sleep(600)
"""


def test_a_job_completes_its_indexes_and_a_statefulsets_pods_find_each_other_by_name(
    kubectl: Callable[..., str],
) -> None:
    kubectl("apply", "-f", "-", stdin=JOB_AND_STATEFULSET)
    kubectl("wait", "--for=condition=complete", "job/indexed", "--timeout=120s")
    logs = kubectl("logs", "-l", "batch.kubernetes.io/job-name=indexed")
    assert sorted(logs.split("\n")[:2]) == ["index 0", "index 1"]
    assert kubectl("get", "job", "indexed", "-o", "jsonpath={.status.completedIndexes}") == "0-1"

    kubectl("rollout", "status", "statefulset/db", "--timeout=120s")
    pods = kubectl("get", "pods", "-l", "app=db", "-o",
                   "jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{'\\n'}{end}")  # fmt: skip
    ips = dict(line.split() for line in pods.strip().splitlines())
    assert sorted(ips) == ["db-0", "db-1"]
    deadline = time.monotonic() + 30
    while f"peer {ips['db-0']}" not in kubectl("logs", "db-1"):
        assert time.monotonic() < deadline, "db-1 did not resolve db-0.db"
        time.sleep(0.2)
    kubectl("delete", "statefulset", "db")
