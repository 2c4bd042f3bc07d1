"""Issue 20: install kubetrain into a cluster the way an operator would, on the local engine.

``kubetrain serve --no-controller`` is the cluster: the API server (RBAC enforced, admission only
through stored webhook configurations) and the executor with the workload controllers, no
built-in TrainJob controller. Then, as docs/install-kubernetes.md says: ``kubectl apply
--server-side -k manifests/``; the CRDs are Established; the controller Deployment's pod runs
``kubetrain controller`` (the image's entrypoint) under its ServiceAccount and becomes Ready; it
provisions its webhook certificate and patches the configurations' caBundles; the API server
calls its webhooks over HTTPS through the Service (an invalid TrainJob is refused with the
webhook's message); a TrainJob trains to Complete; without the ClusterRole's JobSet rule the
next one fails with the API server's 403; ``kubectl delete -k manifests/`` leaves nothing of
the install behind.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "kubeflow-system"
DEPLOYMENT = "kubeflow-trainer-controller-manager"
CRDS = [
    "clustertrainingruntimes.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "trainjobs.trainer.kubeflow.org",
]

TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: hello}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 1
    command: [python, -c, "print('trained under the installed controller')"]
"""

INVALID = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: invalid}
spec:
  runtimeRef: {name: no-such-runtime}
"""


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from kubetrain.local.daemon import stop_daemon

    home = tmp_path_factory.mktemp("install-home")
    log = home.parent / "serve.log"  # a file, not a pipe: a full pipe would stall the server
    with log.open("w") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "kubetrain.cli.main", "serve", "--no-controller",
             "--home", str(home), "--port", "0"],
            stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "kubeconfig: " not in log.read_text():
            if serve.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"kubetrain serve --no-controller did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield home / "kubeconfig"
    finally:
        stop_daemon(home, kill_pods=True)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def test_kubectl_apply_k_manifests_installs_a_controller_that_admits_and_trains(
    kubeconfig: Path,
) -> None:
    def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), *args],
            capture_output=True, text=True, timeout=150, input=stdin,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, done.stderr
            return done.stdout
        assert done.returncode != 0, done.stdout
        return done.stderr

    kubectl("apply", "--server-side", "-k", str(REPO / "manifests"))
    waited = kubectl(
        "wait", "--for=condition=Established", "--timeout=30s", *(f"crd/{c}" for c in CRDS)
    )
    assert waited.count("condition met") == len(CRDS)
    kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=120s")
    pods = kubectl("-n", NAMESPACE, "get", "pods", "-o",
                   "jsonpath={range .items[*]}{.spec.serviceAccountName} {.status.phase}{end}")  # fmt: skip
    assert pods == f"{DEPLOYMENT} Running"
    # The controller provisioned its certificate and patched both configurations' caBundles.
    for kind, name in (("validatingwebhookconfiguration", "validator.trainer.kubeflow.org"),
                       ("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org")):  # fmt: skip
        deadline = time.monotonic() + 60
        while not kubectl("get", kind, name, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"):
            assert time.monotonic() < deadline, f"the controller never patched {kind} {name}"
            time.sleep(0.5)

    refused = kubectl("apply", "-f", "-", stdin=INVALID, check=False)
    assert (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in refused
    )
    assert 'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found' in refused

    kubectl("apply", "-f", "-", stdin=TRAINJOB)
    kubectl("wait", "--for=condition=Complete", "trainjob/hello", "--timeout=120s")
    logs = kubectl("logs", "-l", "jobset.sigs.k8s.io/jobset-name=hello")
    assert "trained under the installed controller" in logs
    kubectl("delete", "trainjob", "hello")

    # The controller runs with its ServiceAccount's rights only: without the ClusterRole's
    # JobSet rule its TrainJob fails with the API server's 403, which it reports in an Event.
    rule = kubectl("get", "clusterrole", DEPLOYMENT, "-o", "jsonpath={.rules[3].resources}")
    assert rule == '["jobsets"]'
    kubectl("patch", "clusterrole", DEPLOYMENT, "--type=json",
            "-p", '[{"op": "remove", "path": "/rules/3"}]')  # fmt: skip
    kubectl("apply", "-f", "-", stdin=TRAINJOB.replace("name: hello", "name: denied"))
    forbidden = (
        'jobsets.jobset.x-k8s.io "denied" is forbidden: User "system:serviceaccount:'
        f'{NAMESPACE}:{DEPLOYMENT}" cannot patch resource "jobsets" in API group "jobset.x-k8s.io"'
    )
    deadline = time.monotonic() + 60
    while forbidden not in kubectl("get", "events", "--field-selector", "involvedObject.name=denied",
                                   "-o", "jsonpath={.items[*].message}"):  # fmt: skip
        assert time.monotonic() < deadline, "no 403 reported for the TrainJob"
        time.sleep(0.5)
    kubectl("delete", "trainjob", "denied")

    # Namespace termination here deletes its objects at once, so kubectl's later deletes of
    # them find nothing (on a cluster the namespace controller is slower): hence --ignore-not-found.
    kubectl("delete", "-k", str(REPO / "manifests"), "--ignore-not-found", "--wait")
    assert not kubectl("get", "crd", "-o", "name").strip()
    left = kubectl(
        "get", "clustertrainingruntimes,clusterroles,clusterrolebindings,"
        "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o", "name",
    )  # fmt: skip
    assert "trainer" not in left
    assert NAMESPACE not in kubectl("get", "namespaces", "-o", "name")
    assert not kubectl("get", "pods", "-A", "-o", "name").strip()
