"""kubectl (the machine's default version) against the server: the commands users type."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import Cluster, condition, trainjob

TRAINJOB_YAML = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
  labels: {{app: demo}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer: {{numNodes: {nodes}}}
"""


def _write(tmp_path: Path, name: str = "demo", nodes: int = 1) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(TRAINJOB_YAML.format(name=name, nodes=nodes))
    return path


def test_apply_creates_then_reports_unchanged_then_configures(
    cluster: Cluster, ns: str, tmp_path: Path
) -> None:
    path = _write(tmp_path)
    assert "created" in cluster.kubectl("-n", ns, "apply", "-f", str(path)).stdout
    assert "unchanged" in cluster.kubectl("-n", ns, "apply", "-f", str(path)).stdout
    path.write_text(TRAINJOB_YAML.format(name="demo", nodes=2))
    assert "configured" in cluster.kubectl("-n", ns, "apply", "-f", str(path)).stdout
    nodes = cluster.kubectl(
        "-n", ns, "get", "trainjob", "demo", "-o", "jsonpath={.spec.trainer.numNodes}"
    ).stdout
    assert nodes == "2"


def test_apply_server_side_then_get_shows_the_field_manager(
    cluster: Cluster, ns: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, "ssa")
    out = cluster.kubectl(
        "-n", ns, "apply", "--server-side", "--field-manager", "me", "-f", str(path)
    ).stdout
    assert "serverside-applied" in out
    managers = cluster.kubectl(
        "-n",
        ns,
        "get",
        "trainjob",
        "ssa",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}",
    ).stdout
    assert managers == "me"


def test_apply_without_validate_false_rejects_an_unknown_field(
    cluster: Cluster, ns: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TRAINJOB_YAML.format(name="bad", nodes=1) + "  colour: blue\n")
    done = cluster.kubectl("-n", ns, "apply", "-f", str(path), check=False)
    assert done.returncode != 0
    assert 'unknown field "spec.colour"' in done.stderr
    assert cluster.kubectl("-n", ns, "get", "trainjobs", "-o", "name").stdout == ""


def test_get_prints_state_and_age_columns(
    cluster: Cluster, ns: str, custom: Any, tmp_path: Path
) -> None:
    cluster.kubectl("-n", ns, "apply", "-f", str(_write(tmp_path)))
    custom.patch_namespaced_custom_object_status(
        "trainer.kubeflow.org",
        "v1alpha1",
        ns,
        "trainjobs",
        "demo",
        {"status": {"conditions": [condition()]}},
    )
    lines = cluster.kubectl("-n", ns, "get", "trainjobs").stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "AGE"]
    assert lines[1].split()[:2] == ["demo", "Complete"]


@pytest.mark.parametrize(
    ("args", "header"),
    [
        (["get", "pods"], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
        (["get", "configmaps"], ["NAME", "DATA", "AGE"]),
        (["get", "namespaces"], ["NAME", "STATUS", "AGE"]),
    ],
    ids=[
        "pods show ready, status and restarts",
        "config maps show their data count",
        "namespaces show their phase",
    ],
)
def test_core_kinds_have_their_usual_columns(
    cluster: Cluster, ns: str, core: Any, args: list[str], header: list[str]
) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    lines = cluster.kubectl("-n", ns, *args).stdout.splitlines()
    assert lines[0].split() == header


def test_get_watch_prints_each_change(cluster: Cluster, ns: str, tj_api: Any) -> None:
    import queue
    import threading

    tj_api("create", trainjob("sentinel"))
    cmd = [
        "kubectl",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--cache-dir",
        str(cluster.cache_dir),
    ]
    proc = subprocess.Popen(
        [*cmd, "-n", ns, "get", "trainjobs", "-w", "--output-watch-events", "--no-headers"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True
    )
    reader.start()
    try:
        assert lines.get(timeout=30).split()[:2] == ["ADDED", "sentinel"], "the watch is open"
        tj_api("create", trainjob("watched"))
        tj_api("patch", "watched", {"spec": {"suspend": True}})
        tj_api("delete", "watched")
        events = [lines.get(timeout=30).split()[:2] for _ in range(3)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert events == [["ADDED", "watched"], ["MODIFIED", "watched"], ["DELETED", "watched"]]


def test_describe_shows_spec_and_events(cluster: Cluster, ns: str, tj_api: Any, core: Any) -> None:
    created = tj_api("create", trainjob("described"))
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "described.1"},
            "involvedObject": {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "described",
                "namespace": ns,
                "uid": created["metadata"]["uid"],
            },
            "reason": "Created",
            "message": "JobSet created",
            "type": "Normal",
            "firstTimestamp": "2026-11-29T10:00:00Z",
            "lastTimestamp": "2026-11-29T10:00:00Z",
            "count": 1,
            "source": {"component": "trainer"},
        },
    )
    out = cluster.kubectl("-n", ns, "describe", "trainjob", "described").stdout
    assert "Num Nodes:" in out
    assert "JobSet created" in out, "describe finds events by involvedObject field selectors"


def test_delete_removes_and_waits(cluster: Cluster, ns: str, tj_api: Any) -> None:
    tj_api("create", trainjob("gone"))
    assert (
        'trainjob.trainer.kubeflow.org "gone" deleted'
        in cluster.kubectl("-n", ns, "delete", "trainjob", "gone").stdout
    )
    done = cluster.kubectl("-n", ns, "get", "trainjob", "gone", check=False)
    assert done.returncode != 0 and "NotFound" in done.stderr


def test_logs_reads_the_executor_log_file(
    cluster: Cluster, embedded: Any, ns: str, core: Any
) -> None:
    core.create_namespaced_pod(
        ns,
        {"metadata": {"name": "worker"}, "spec": {"containers": [{"name": "node", "image": "x"}]}},
    )
    folder = embedded.http.logs_dir / ns / "worker"
    folder.mkdir(parents=True)
    (folder / "node.log").write_text("epoch 1\nepoch 2\n")
    core.patch_namespaced_pod_status("worker", ns, {"status": {"phase": "Succeeded"}})
    assert cluster.kubectl("-n", ns, "logs", "worker").stdout == "epoch 1\nepoch 2\n"
    assert cluster.kubectl("-n", ns, "logs", "worker", "--tail", "1").stdout == "epoch 2\n"
    assert (
        cluster.kubectl("-n", ns, "logs", "-f", "worker", timeout=10).stdout == "epoch 1\nepoch 2\n"
    )


def test_typed_creates_sent_as_protobuf_are_understood(
    cluster: Cluster, ns: str, core: Any
) -> None:
    """kubectl 1.32 sends these bodies as protobuf (no JSON fallback)."""
    cluster.kubectl("-n", ns, "create", "configmap", "cm", "--from-literal=a=b")
    cluster.kubectl("-n", ns, "create", "secret", "generic", "s", "--from-literal=token=t0k")
    cluster.kubectl("-n", ns, "create", "serviceaccount", "sa")
    extra = f"{ns}-extra"
    cluster.kubectl("create", "namespace", extra)
    try:
        assert core.read_namespaced_config_map("cm", ns).data == {"a": "b"}
        secret = core.read_namespaced_secret("s", ns)
        assert (secret.type, secret.data) == ("Opaque", {"token": "dDBr"})
        assert core.read_namespaced_service_account("sa", ns).metadata.name == "sa"
        assert core.read_namespace(extra).status.phase == "Active"
    finally:
        core.delete_namespace(extra)


def test_nodes_print_readiness(cluster: Cluster, core: Any, ns: str) -> None:
    name = f"{ns}-node"
    core.create_node({"metadata": {"name": name}})
    core.patch_node_status(
        name,
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0"},
            }
        },
        _preload_content=False,  # the client's model insists on every nodeInfo field
    )
    try:
        lines = cluster.kubectl("get", "node", name).stdout.splitlines()
        assert lines[0].split() == ["NAME", "STATUS", "AGE", "VERSION"]
        assert lines[1].split()[1] == "Ready" and lines[1].split()[3] == "v1.32.0"
    finally:
        core.delete_node(name)
