"""Golden cases: ``<case>/trainjob.yaml`` (+ optional ``runtime.yaml``, ``feature-gates.txt``,
``existing.yaml`` = objects already in the cluster) renders to exactly ``<case>/expected.yaml``:
every applied object, then the TrainJob with its status after the reconcile (what ``kubetrain
render`` prints). A case with ``expected-errors.txt`` is a rejection instead: admission must
return exactly those ``<field path>: <reason>`` lines.

Each expected file was reviewed by hand against upstream v2.3.0 (pkg/runtime/) (the case's comment says what it
shows). To regenerate after a deliberate change run ``KUBETRAIN_UPDATE_GOLDEN=1 pytest
tests/golden`` and review the diff line by line before committing: a golden file that merely
records our output proves nothing. Without ``runtime.yaml`` the TrainJob's runtime
comes from kubetrain's default runtimes, stored as the API server would (CRD defaults applied).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.dump import dump_yaml
from kubetrain.api.load import load_files
from kubetrain.api.schema import apply_defaults
from kubetrain.runtime import Environment, Existing, FeatureGates, render, validate_trainjob
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.podspec import tree_copy
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed
from upstream_data import jobset_crd

HERE = Path(__file__).parent
CASES = sorted(p.name for p in HERE.iterdir() if (p / "trainjob.yaml").is_file())
NOW = datetime(2026, 1, 1, tzinfo=UTC)
CA = "-----BEGIN CERTIFICATE-----\nGOLDEN-CA\n-----END CERTIFICATE-----\n"


def _keys() -> tuple[str, str]:
    return ssh_keypair_from_seed(b"golden")


ENV = Environment(ssh_keypair=_keys, ca_pem=CA)


def inputs(case: Path) -> tuple[dict[str, Any], dict[str, Any] | None, FeatureGates]:
    (job,) = load_files([case / "trainjob.yaml"])
    runtime: dict[str, Any] | None
    if (case / "runtime.yaml").is_file():
        (runtime,) = load_files([case / "runtime.yaml"])
    else:
        name = job["spec"]["runtimeRef"]["name"]
        found = [r for r in default_runtimes() if r["metadata"]["name"] == name]
        runtime = apply_defaults(tree_copy(found[0])) if found else None
    gates_file = case / "feature-gates.txt"
    text = gates_file.read_text().strip() if gates_file.is_file() else "TrainJobStatus=false"
    return job, runtime, FeatureGates.parse(text)


def render_case(case: Path) -> list[dict[str, Any]]:
    job, runtime, gates = inputs(case)
    existing_file = case / "existing.yaml"
    existing = (
        Existing.of(*yaml.safe_load_all(existing_file.read_text()))
        if existing_file.is_file()
        else None
    )
    plan = render(job, runtime, gates=gates, environment=ENV, now=NOW, existing=existing)
    shown = dict(job)
    if plan.trainjob_status:
        shown["status"] = plan.trainjob_status
    return [*plan.objects, shown]


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, jobset_validator: Any) -> None:
    path = HERE / case
    errors_file = path / "expected-errors.txt"
    if errors_file.is_file():
        job, runtime, gates = inputs(path)
        lines = [str(e) for e in validate_trainjob(job, runtime, gates=gates).errors]
        assert lines == errors_file.read_text().splitlines()
        return
    got = render_case(path)
    expected_file = path / "expected.yaml"
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN") == "1":
        expected_file.write_text(dump_yaml(got))
    expected = [d for d in yaml.safe_load_all(expected_file.read_text()) if d is not None]
    assert got == expected
    for obj in got:
        if obj["kind"] == "JobSet":
            errors = list(jobset_validator.iter_errors(obj))
            assert not errors, [e.message for e in errors]


@pytest.fixture(scope="session")
def jobset_validator() -> Any:
    import jsonschema

    with jobset_crd().open() as f:
        crd = yaml.load(f, Loader=yaml.CSafeLoader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])
