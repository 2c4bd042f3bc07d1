"""Our generated CRDs against upstream's published ones (found at run time by upstream_data).

Our CRDs are written by tools/gen_crds.py from kubetrain.api.types and Kubernetes' OpenAPI
definitions; upstream's are controller-gen output from Go. Apart from descriptions (prose, ours
is our own) they must agree on everything that shapes the API: names, scope, subresources,
printer columns, and in the schema every property path, type, format, enum, default, required
list, bound, pattern, CEL rule and list/map semantics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import crd_for, crd_manifests, schema_for
from upstream_data import require

REPO = Path(__file__).resolve().parents[2]

UPSTREAM_FILES = {
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
    "TrainingRuntime": "trainer.kubeflow.org_trainingruntimes.yaml",
    "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "JobSet": "jobset.x-k8s.io_jobsets.yaml",
}

# Schema paths where we knowingly differ from upstream (Kubernetes version drift in embedded
# core/v1 types), as {path: reason}. Empty: our Kubernetes 1.36 OpenAPI definitions plus the
# Go-marker table in tools/gen_crds.py reproduce upstream's embedded schemas exactly.
ALLOWED_DIFFERENCES: dict[str, str] = {}


def _upstream(kind: str) -> dict[str, Any]:
    text = (require("upstream-crds") / UPSTREAM_FILES[kind]).read_text()
    docs = [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d]
    assert len(docs) == 1
    crd: dict[str, Any] = docs[0]
    return crd


def _ours(kind: str) -> dict[str, Any]:
    (crd,) = [c for c in crd_manifests() if c["spec"]["names"]["kind"] == kind]
    return crd


def _strip(x: Any) -> Any:
    """Drop prose: descriptions differ by design (ours are our own words)."""
    if isinstance(x, dict):
        return {
            k: _strip(v) for k, v in x.items() if not (k == "description" and isinstance(v, str))
        }
    if isinstance(x, list):
        return [_strip(i) for i in x]
    return x


def _diff(ours: Any, theirs: Any, path: str, out: list[str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k in sorted(set(ours) | set(theirs)):
            sub = f"{path}/{k}"
            if k not in ours:
                out.append(f"{sub}: missing in ours")
            elif k not in theirs:
                out.append(f"{sub}: not in upstream")
            else:
                _diff(ours[k], theirs[k], sub, out)
    elif isinstance(ours, list) and isinstance(theirs, list) and path.endswith("/required"):
        if sorted(ours) != sorted(theirs):
            out.append(f"{path}: {ours} != {theirs}")
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _diff(a, b, f"{path}[{i}]", out)
    elif ours != theirs:
        out.append(f"{path}: ours {json.dumps(ours)[:80]} != upstream {json.dumps(theirs)[:80]}")


KINDS = list(UPSTREAM_FILES)


@pytest.mark.parametrize("kind", KINDS)
def test_names_scope_and_group_match_upstream(kind: str) -> None:
    ours, theirs = _ours(kind)["spec"], _upstream(kind)["spec"]
    assert ours["group"] == theirs["group"]
    assert ours["names"] == theirs["names"]  # kind, listKind, plural, singular, no shortNames
    assert ours["scope"] == theirs["scope"]
    assert ours.get("names", {}).get("shortNames") == theirs.get("names", {}).get("shortNames")
    assert _ours(kind)["metadata"]["name"] == _upstream(kind)["metadata"]["name"]


@pytest.mark.parametrize("kind", KINDS)
def test_versions_subresources_and_printer_columns_match_upstream(kind: str) -> None:
    (ours,) = _ours(kind)["spec"]["versions"]
    (theirs,) = _upstream(kind)["spec"]["versions"]
    for key in ("name", "served", "storage"):
        assert ours[key] == theirs[key]
    assert ours.get("subresources") == theirs.get("subresources")
    assert ours.get("additionalPrinterColumns") == theirs.get("additionalPrinterColumns")


@pytest.mark.parametrize("kind", KINDS)
def test_schema_matches_upstream_apart_from_descriptions(kind: str) -> None:
    (ours,) = _ours(kind)["spec"]["versions"]
    (theirs,) = _upstream(kind)["spec"]["versions"]
    out: list[str] = []
    _diff(
        _strip(ours["schema"]["openAPIV3Schema"]),
        _strip(theirs["schema"]["openAPIV3Schema"]),
        "",
        out,
    )
    unexpected = [d for d in out if d.split(":")[0] not in ALLOWED_DIFFERENCES]
    assert unexpected == [], "\n".join(unexpected[:50])


def test_the_compact_crds_are_the_yaml_manifests_without_schema_prose() -> None:
    full, compact = crd_manifests(), crd_manifests(descriptions=False)
    for crd in full:
        for version in crd["spec"]["versions"]:
            version["schema"]["openAPIV3Schema"] = _strip(version["schema"]["openAPIV3Schema"])
    assert compact == full
    for crd in compact:
        spec = crd["spec"]
        (version,) = spec["versions"]
        api_version = f"{spec['group']}/{version['name']}"
        assert (
            schema_for(api_version, spec["names"]["kind"]) == version["schema"]["openAPIV3Schema"]
        )


@pytest.mark.parametrize(
    ("api_version", "kind", "found"),
    [
        ("trainer.kubeflow.org/v1alpha1", "TrainJob", True),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", True),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", True),
        ("trainer.kubeflow.org/v1", "TrainJob", False),
        ("v1", "ConfigMap", False),
    ],
    ids=[
        "a TrainJob has a CRD",
        "a ClusterTrainingRuntime has a CRD",
        "a JobSet has a CRD",
        "an unserved version has none",
        "a core kind has none",
    ],
)
def test_crd_for(api_version: str, kind: str, found: bool) -> None:
    crd = crd_for(api_version, kind)
    assert (crd is not None) == found
    if crd is not None:
        assert crd["spec"]["names"]["kind"] == kind


def test_crd_manifests_returns_copies_the_caller_may_change() -> None:
    first = crd_manifests()
    first[0]["spec"]["group"] = "changed"
    assert crd_manifests()[0]["spec"]["group"] == "trainer.kubeflow.org"


def test_the_committed_crds_are_what_the_generator_writes() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_crds.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_generator_never_reads_upstream_crds() -> None:
    source = (REPO / "tools" / "gen_crds.py").read_text()
    assert "upstream-crds" not in source
    assert "shared" not in source
