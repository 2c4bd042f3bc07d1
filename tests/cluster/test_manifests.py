"""The install manifest: generated files in sync, kustomize renders the same objects, every object
valid (Kubernetes OpenAPI schemas, the project's CRDs), least-privilege RBAC, hardened pod."""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli import cmd_install
from kubetrain.controller.deploy import OVERLAYS, install_objects, manifest_files
from kubetrain.controller.webhook import WEBHOOKS

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
K8S_VERSION = "1.32"
# The C loader: the CRDs make the pure-Python one take seconds per render.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _objects(overlay: str) -> list[Obj]:
    """install_objects(overlay), built once for the module: every check here only reads them."""
    return install_objects(overlay)


def _key(obj: Obj) -> str:
    return json.dumps(obj, sort_keys=True)


def test_manifests_directory_is_generated_from_the_package() -> None:
    """Regenerate with: kubetrain install --write-manifests manifests"""
    wanted = manifest_files()
    on_disk = {str(p.relative_to(MANIFESTS)): p.read_text() for p in MANIFESTS.rglob("*.yaml")}
    assert sorted(on_disk) == sorted(wanted)
    stale = [path for path, text in wanted.items() if on_disk[path] != text]
    assert not stale, f"out of date (regenerate): {stale}"


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_kustomize_renders_the_same_objects(overlay: str, kustomized: dict[str, list[Obj]]) -> None:
    rendered = kustomized[overlay]
    assert sorted(map(_key, rendered)) == sorted(map(_key, _objects(overlay)))


def test_install_print_is_the_default_overlay() -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = cmd_install.run(
            argparse.Namespace(print=True, overlay="default", write_manifests=None)
        )
    assert code == 0
    printed = [d for d in yaml.load_all(buf.getvalue(), Loader=LOADER) if d]
    assert printed == _objects("default")
    kinds = [o["kind"] for o in printed]
    assert kinds[:4] == ["Namespace"] + ["CustomResourceDefinition"] * 3  # apply order


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_object_validates(overlay: str) -> None:
    import kubernetes_validate

    from kubetrain.api.schema import validate_object

    for obj in _objects(overlay):
        if obj["apiVersion"].startswith("trainer.kubeflow.org/"):
            errors = validate_object(obj, strict=True)
            assert not errors, (obj["metadata"]["name"], errors)
        elif obj["apiVersion"].startswith("cert-manager.io/"):
            continue  # cert-manager's CRDs are not available here
        else:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def _rbac_rules() -> list[tuple[str, Obj]]:
    return [
        (f"{o['kind']}/{o['metadata']['name']}", rule)
        for overlay in OVERLAYS
        for o in _objects(overlay)
        if o["kind"] in ("Role", "ClusterRole")
        for rule in o["rules"]
    ]


def test_rbac_has_no_wildcards() -> None:
    rules = _rbac_rules()
    assert rules
    for where, rule in rules:
        for key in ("verbs", "resources", "apiGroups", "resourceNames"):
            assert "*" not in rule.get(key, []), (where, rule)
            assert not any("*" in v for v in rule.get(key, [])), (where, rule)
        assert "nonResourceURLs" not in rule, where


def test_rbac_is_least_privilege() -> None:
    objs = {(o["kind"], o["metadata"]["name"]): o for o in _objects("manager")}
    cluster = objs[("ClusterRole", "kubeflow-trainer-controller-manager")]["rules"]
    granted = {
        (g, r, v)
        for rule in cluster
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    # Never: reading every Secret, touching pods, or deleting what the controller does not own.
    assert ("", "secrets", "list") not in granted and ("", "secrets", "watch") not in granted
    assert not any(r in ("pods", "nodes", "namespaces") for _, r, _ in granted)
    assert {r for _, r, v in granted if v == "delete"} == {"jobsets"}
    # Webhook configurations: only the two kubetrain owns, by name.
    for rule in cluster:
        if rule["apiGroups"] == ["admissionregistration.k8s.io"]:
            assert rule["resourceNames"] in (
                ["validator.trainer.kubeflow.org"],
                ["defaulter.trainer.kubeflow.org"],
            )
    role = objs[("Role", "kubeflow-trainer-controller-manager")]
    assert role["metadata"]["namespace"] == "kubeflow-system"
    public = objs[("Role", "kubeflow-trainer-public")]["rules"]
    assert public == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get", "list", "watch"],
        }
    ]


def test_controller_calls_are_covered_by_rbac() -> None:
    """Every REST call in the controller's code names a resource the ClusterRole or Role grants."""
    src = REPO / "src" / "kubetrain" / "controller"
    used: set[str] = set()
    for path in src.glob("*.py"):
        used |= set(re.findall(r'"(\w+(?:/\w+)?)"', path.read_text()))
    granted = {r for _, rule in _rbac_rules() for r in rule["resources"]}
    for resource in ("tokenreviews", "leases", "priorityclasses", "secrets", "events"):
        assert resource in granted
    from kubetrain.kube import kinds

    for kind in (
        kinds.TRAINJOB,
        kinds.JOBSET,
        kinds.CONFIGMAP,
        kinds.SECRET,
        kinds.EVENT,
        kinds.LEASE,
    ):
        assert kind.plural in granted, kind


def test_webhook_configurations_follow_upstream() -> None:
    objs = _objects("manager")
    validating = next(o for o in objs if o["kind"] == "ValidatingWebhookConfiguration")
    mutating = next(o for o in objs if o["kind"] == "MutatingWebhookConfiguration")
    assert validating["metadata"]["name"] == "validator.trainer.kubeflow.org"
    assert mutating["metadata"]["name"] == "defaulter.trainer.kubeflow.org"
    entries = validating["webhooks"] + mutating["webhooks"]
    assert {(w["name"], w["clientConfig"]["service"]["path"]) for w in entries} == {
        (w.name, w.path) for w in WEBHOOKS
    }
    for w in entries:
        assert w["failurePolicy"] == "Fail" and w["sideEffects"] == "None"
        assert w["admissionReviewVersions"] == ["v1"]
        assert w["clientConfig"]["service"] == {
            "name": "kubeflow-trainer-controller-manager",
            "namespace": "kubeflow-system",
            "path": w["clientConfig"]["service"]["path"],
            "port": 443,
        }
        assert w["rules"][0]["operations"] == ["CREATE", "UPDATE"]
        runtime = "runtime" in w["name"]
        assert ("objectSelector" in w) == runtime
    runtimes = _objects("runtimes")
    assert all(
        r["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] == "disabled"
        for r in runtimes
    )


def test_deployment_is_hardened() -> None:
    objs = _objects("manager")
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {
        "webhook-server": 9443,
        "metrics": 8443,
        "status-server": 10443,
        "health": 8081,
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    service = next(o for o in objs if o["kind"] == "Service")
    assert {(p["name"], p["port"]) for p in service["spec"]["ports"]} == {
        ("monitoring-port", 8443),
        ("webhook-server", 443),
        ("status-server", 10443),
    }


def test_shipped_configuration_loads(tmp_path: Path) -> None:
    from kubetrain.controller.cluster import load_config_file

    objs = _objects("cert-manager")
    config_map = next(o for o in objs if o["metadata"]["name"] == "kubeflow-trainer-config")
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(config_map["data"]["controller_manager_config.yaml"])
    config = load_config_file(path)
    assert config.cert_management is False  # the cert-manager overlay's one change
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
    assert config.gates.trainjob_status is True
    assert (config.webhook_port, config.metrics_port, config.health_port, config.status_port) == (
        9443,
        8443,
        8081,
        10443,
    )


def test_dockerfile_is_small_pinned_and_non_root() -> None:
    text = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert bases and all(re.search(r"@sha256:|:\d+\.\d+\.\d+", b) for b in bases), bases
    for source in re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", text, re.MULTILINE):
        for item in source.split():
            assert (REPO / item).exists(), item
    assert "USER 65532:65532" in text
    assert 'ENTRYPOINT ["kubetrain", "controller"]' in text
    assert "torch" not in re.sub(r"#.*", "", text).replace("No [torch]", "")
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ignore[0 if ignore[0] != "#" else ignore.index("*")] == "*" or "*" in ignore


def test_the_data_cache_image_runs_upstreams_commands_pinned_and_non_root() -> None:
    text = (REPO / "Dockerfile.data-cache").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert bases and all(re.search(r"@sha256:|:\d+\.\d+\.\d+", b) for b in bases), bases
    copied = [
        item
        for source in re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", text, re.MULTILINE)
        for item in source.split()
    ]
    assert all((REPO / item).exists() for item in copied), copied
    # The cache initializer's LeaderWorkerSet runs `head` and `worker` (upstream's commands).
    for role in ("head", "worker"):
        shim = REPO / "src/kubetrain/datacache/bin" / role
        assert str(shim.relative_to(REPO)) in copied and os.access(shim, os.X_OK), role
        assert f"-m kubetrain.datacache {role}" in shim.read_text()
    assert '".[datacache]"' in text and "USER 65532:65532" in text
    assert "torch" not in re.sub(r"#.*", "", text)


def test_install_without_print_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    code = cmd_install.run(argparse.Namespace(print=False, overlay="default", write_manifests=None))
    assert code == 2
    assert "kubectl apply --server-side" in capsys.readouterr().err


def test_controller_refuses_bad_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubetrain.cli import cmd_controller

    parser = argparse.ArgumentParser()
    cmd_controller.add_arguments(parser)
    bad = tmp_path / "c.yaml"
    bad.write_text("kind: Configuration\nleaderElection: {leaseDuration: soon}\n")
    assert cmd_controller.run(parser.parse_args(["--config", str(bad)])) == 2
    assert "invalid duration" in capsys.readouterr().err
    assert cmd_controller.run(parser.parse_args(["--feature-gates", "Nope=true"])) == 2
