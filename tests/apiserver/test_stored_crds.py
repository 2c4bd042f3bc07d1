"""CustomResourceDefinitions: stored with the apiextensions server's name check and status, so
``kubectl apply --server-side -k manifests/`` gets past its CRDs and ``kubectl wait`` answers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from apiserver_support import Cluster, namespaced_crd

Obj = dict[str, Any]


def _widget_crd(**spec: Any) -> Obj:
    """A CRD for a kind the server does not serve (short name ``wd``, any fields kept)."""
    body = namespaced_crd("Widget", "widgets", {})
    body["spec"]["names"]["shortNames"] = ["wd"]
    body["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    }
    body["spec"].update(spec)
    return body


def _apply(cluster: Cluster, tmp_path: Path, body: Obj, *, check: bool = True) -> Any:
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(body))
    return cluster.kubectl("apply", "--server-side", "-f", str(path), check=check)


def _trainjob_crd() -> Obj:
    from kubetrain.api.schema import crd_manifests

    return next(
        c for c in crd_manifests() if c["metadata"]["name"] == "trainjobs.trainer.kubeflow.org"
    )


def test_a_crd_for_a_served_kind_is_stored_established_listed_and_deleted(
    cluster: Cluster, tmp_path: Path
) -> None:
    _apply(cluster, tmp_path, _trainjob_crd())
    name = "crd/trainjobs.trainer.kubeflow.org"
    waited = cluster.kubectl("wait", "--for", "condition=established", name, "--timeout=10s")
    assert "condition met" in waited.stdout
    stored = json.loads(cluster.kubectl("get", name, "-o", "json").stdout)
    assert stored["status"]["acceptedNames"] == {
        "kind": "TrainJob",
        "listKind": "TrainJobList",
        "plural": "trainjobs",
        "singular": "trainjob",
    }
    assert stored["status"]["storedVersions"] == ["v1alpha1"]
    listing = cluster.kubectl("get", "crds").stdout.splitlines()
    assert listing[0].split() == ["NAME", "CREATED", "AT"]
    assert any(row.split()[0] == "trainjobs.trainer.kubeflow.org" for row in listing[1:])
    # The kind stays served by the server's own table: a TrainJob list still answers.
    cluster.kubectl("get", "trainjobs", "-A")
    cluster.kubectl("delete", name)
    gone = cluster.kubectl("get", name, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_a_crd_for_a_kind_the_server_does_not_serve_is_stored_and_says_it_is_not_served(
    cluster: Cluster, tmp_path: Path
) -> None:
    _apply(cluster, tmp_path, _widget_crd())
    try:
        stored = json.loads(
            cluster.kubectl("get", "crd", "widgets.kt-test.io", "-o", "json").stdout
        )
        conditions = {c["type"]: c for c in stored["status"]["conditions"]}
        assert conditions["NamesAccepted"]["status"] == "True"
        assert conditions["Established"]["status"] == "False"
        assert conditions["Established"]["reason"] == "NotServed"
        assert (
            "Widget in kt-test.io/v1 is stored but not served"
            in conditions["Established"]["message"]
        )
        assert stored["status"]["acceptedNames"]["shortNames"] == ["wd"]
    finally:
        cluster.kubectl("delete", "crd", "widgets.kt-test.io")


def _renamed(body: Obj) -> Obj:
    body["metadata"]["name"] = "gadgets.kt-test.io"
    return body


def _two_storage_versions(body: Obj) -> Obj:
    extra = copy.deepcopy(body["spec"]["versions"][0])
    extra["name"] = "v2"
    body["spec"]["versions"].append(extra)
    return body


def _no_scope(body: Obj) -> Obj:
    body["spec"]["scope"] = "Everywhere"
    return body


BAD = [
    ("a name other than plural.group", _renamed, 'metadata.name: Invalid value', 'must be spec.names.plural+"."+spec.group: "widgets.kt-test.io"'),
    ("two storage versions", _two_storage_versions, "spec.versions", "must have exactly one version marked as storage version"),
    ("an unknown scope", _no_scope, "spec.scope", '"Cluster", "Namespaced"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "change", "field", "message"), BAD, ids=[f"refuses {b[0]}" for b in BAD]
)
def test_an_invalid_crd_is_refused_naming_its_field(
    cluster: Cluster, tmp_path: Path, case: str, change: Any, field: str, message: str
) -> None:
    done = _apply(cluster, tmp_path, change(_widget_crd()), check=False)
    assert done.returncode != 0
    assert "is invalid" in done.stderr and field in done.stderr and message in done.stderr
