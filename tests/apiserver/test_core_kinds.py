"""The core kinds next to a TrainJob: stored, listed with kubectl's columns, scaled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import Cluster, kube_request

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: http, image: python:3.11}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs}
spec:
  replicas: 3
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: http, image: python:3.11}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {disk: ssd}
      containers: [{name: agent, image: busybox}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 1
  selector: {app: legacy}
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  completions: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses: [{ip: 10.0.0.5}, {ip: 10.0.0.6}]
  ports: [{port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc}
addressType: IPv4
endpoints: [{addresses: [10.0.0.5]}]
ports: [{port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: jane}]
"""

CLUSTER_SCOPED = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kt-test-viewer}
rules: [{apiGroups: [""], resources: [pods], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kt-test-viewers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kt-test-viewer}
subjects: [{kind: ServiceAccount, name: bot, namespace: tools}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.kt-test.io}
spec:
  group: metrics.kt-test.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {namespace: kube-system, name: metrics-server}
"""


@pytest.fixture(scope="module")
def applied(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One namespace holding one object of each namespaced kind (and the cluster-scoped ones)."""
    folder = tmp_path_factory.mktemp("core-kinds")
    cluster.kubectl("create", "namespace", "core-kinds")
    (folder / "ns.yaml").write_text(MANIFEST)
    (folder / "cluster.yaml").write_text(CLUSTER_SCOPED)
    cluster.kubectl("-n", "core-kinds", "apply", "-f", str(folder / "ns.yaml"))
    cluster.kubectl("apply", "-f", str(folder / "cluster.yaml"))
    return "core-kinds"


# What `kubectl get` prints for each kind on Kubernetes 1.32 (header, then the row's cells
# without the trailing age); from k8s.io/kubernetes pkg/printers/internalversion.
LISTINGS = [
    ("deployment", "web", ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], ["web", "0/2", "0", "0"]),
    ("replicaset", "web-rs", ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], ["web-rs", "3", "0", "0"]),
    (
        "daemonset",
        "agent",
        ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"],
        ["agent", "0", "0", "0", "0", "0", "disk=ssd"],
    ),
    ("statefulset", "db", ["NAME", "READY", "AGE"], ["db", "0/1"]),  # replicas defaults to 1
    ("replicationcontroller", "legacy", ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], ["legacy", "1", "0", "0"]),
    ("job", "once", ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], ["once", "Running", "0/3"]),
    ("endpoints", "web", ["NAME", "ENDPOINTS", "AGE"], ["web", "10.0.0.5:8080,10.0.0.6:8080"]),
    (
        "service",
        "web",
        ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        ["web", "ClusterIP", "<none>", "<none>", "80/TCP,53/UDP"],
    ),
    (
        "endpointslice",
        "web-abc",
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        ["web-abc", "IPv4", "8080", "10.0.0.5"],
    ),
    ("rolebinding", "read-pods", ["NAME", "ROLE", "AGE"], ["read-pods", "Role/reader"]),
    (
        "clusterrolebinding",
        "kt-test-viewers",
        ["NAME", "ROLE", "AGE"],
        ["kt-test-viewers", "ClusterRole/kt-test-viewer"],
    ),
    (
        "apiservice",
        "v1beta1.metrics.kt-test.io",
        ["NAME", "SERVICE", "AVAILABLE", "AGE"],
        ["v1beta1.metrics.kt-test.io", "kube-system/metrics-server", "Unknown"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "name", "header", "cells"), LISTINGS, ids=[f"kubectl get {r[0]}" for r in LISTINGS]
)
def test_kubectl_get_prints_the_columns_kubernetes_prints(
    cluster: Cluster, applied: str, kind: str, name: str, header: list[str], cells: list[str]
) -> None:
    out = cluster.kubectl("-n", applied, "get", kind, name).stdout.splitlines()
    assert out[0].split("  ")[0] == "NAME"
    assert [h.strip() for h in out[0].split("  ") if h.strip()] == header
    assert out[1].split()[: len(cells)] == cells


def test_a_role_lists_with_its_creation_time(cluster: Cluster, applied: str) -> None:
    out = cluster.kubectl("-n", applied, "get", "role", "reader").stdout.splitlines()
    assert out[0].split() == ["NAME", "CREATED", "AT"]
    assert out[1].split()[1].endswith("Z")


def test_kubectl_scale_changes_only_the_replica_count_through_the_scale_subresource(
    cluster: Cluster, applied: str
) -> None:
    cluster.kubectl("-n", applied, "scale", "deployment/web", "--replicas=5")
    replicas = cluster.kubectl(
        "-n", applied, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"
    ).stdout
    assert replicas == "5"
    scale = cluster.kubectl(
        "-n", applied, "get", "--raw", f"/apis/apps/v1/namespaces/{applied}/deployments/web/scale"
    ).stdout
    assert '"kind":"Scale"' in scale and '"selector":"app=web"' in scale


def test_a_negative_scale_is_refused_naming_the_field(api_client: Any, applied: str) -> None:
    from kubernetes.client import ApiException

    path = f"/apis/apps/v1/namespaces/{applied}/replicasets/web-rs/scale"
    with pytest.raises(ApiException) as caught:
        kube_request(
            api_client, "PATCH", path, {"spec": {"replicas": -1}}, "application/merge-patch+json"
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "spec.replicas"


def test_a_scale_whose_spec_is_no_object_is_a_bad_request(api_client: Any, applied: str) -> None:
    from kubernetes.client import ApiException

    path = f"/apis/apps/v1/namespaces/{applied}/replicasets/web-rs/scale"
    with pytest.raises(ApiException) as caught:
        kube_request(api_client, "PATCH", path, {"spec": [3]}, "application/merge-patch+json")
    assert caught.value.status == 400
    assert "spec of the Scale must be an object" in json.loads(caught.value.body)["message"]


def test_wide_output_shows_containers_images_and_selector(cluster: Cluster, applied: str) -> None:
    out = cluster.kubectl("-n", applied, "get", "rs", "web-rs", "-o", "wide").stdout.splitlines()
    assert out[0].split()[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert out[1].split()[-3:] == ["http", "python:3.11", "app=rs"]


def test_discovery_names_the_scale_subresource_as_autoscaling_scale(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = cluster.kubectl("get", "--raw", "/apis/apps/v1").stdout
    assert '"name":"deployments/scale"' in out.replace(" ", "")
    assert '"group":"autoscaling"' in out.replace(" ", "")


def test_kubectl_cluster_info_names_the_control_plane(cluster: Cluster) -> None:
    out = cluster.kubectl("cluster-info").stdout
    assert "Kubernetes control plane is running at https://127.0.0.1:" in out


def test_the_kubernetes_service_points_at_the_server(cluster: Cluster, core: Any) -> None:
    if cluster.server is None:
        pytest.skip("needs the embedded API server's address")
    endpoints = core.read_namespaced_endpoints("kubernetes", "default")
    assert [p.port for p in endpoints.subsets[0].ports] == [cluster.server.port]
    assert core.read_namespaced_service("kubernetes", "default").spec.ports[0].port == 443


@pytest.mark.parametrize(
    ("kind", "name", "path", "value"),
    [
        ("statefulset", "db", "{.spec.replicas}", "1"),
        ("deployment", "web", "{.spec.strategy.rollingUpdate.maxSurge}", "25%"),
        ("job", "once", "{.spec.parallelism} {.spec.backoffLimit} {.spec.completionMode}", "1 6 NonIndexed"),
        ("service", "web", "{.spec.ports[1].targetPort} {.spec.sessionAffinity}", "53 None"),
    ],
    ids=[
        "a stateful set without replicas gets one",
        "a deployment rolls 25% at a time",
        "a job runs one pod at a time and retries six times",
        "a service port targets the same port",
    ],
)  # fmt: skip
def test_the_server_fills_in_kubernetes_defaults(
    cluster: Cluster, applied: str, kind: str, name: str, path: str, value: str
) -> None:
    assert (
        cluster.kubectl("-n", applied, "get", kind, name, "-o", f"jsonpath={path}").stdout == value
    )


def test_kubectl_apply_again_patches_a_deployment_strategically(
    cluster: Cluster, applied: str, tmp_path: Path
) -> None:
    manifest = MANIFEST.split("---")[0].replace(
        "{name: http, image: python:3.11}",
        "{name: http, image: python:3.12}, {name: sidecar, image: busybox}",
    )
    (tmp_path / "web.yaml").write_text(manifest)
    out = cluster.kubectl("-n", applied, "apply", "-f", str(tmp_path / "web.yaml")).stdout
    assert "deployment.apps/web configured" in out
    images = cluster.kubectl(
        "-n",
        applied,
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[*].image}",
    ).stdout
    assert images == "python:3.12 busybox"


def test_kubectl_explain_reads_kubernetes_own_schema_of_a_core_kind(cluster: Cluster) -> None:
    out = cluster.kubectl("explain", "deployment.spec.strategy").stdout
    assert "KIND:       Deployment" in out and "rollingUpdate" in out


def test_a_job_selects_its_pods_by_its_uid_as_the_job_registry_does(
    cluster: Cluster, applied: str
) -> None:
    job = json.loads(cluster.kubectl("-n", applied, "get", "job", "once", "-o", "json").stdout)
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert (labels["batch.kubernetes.io/job-name"], labels["controller-uid"]) == ("once", uid)
