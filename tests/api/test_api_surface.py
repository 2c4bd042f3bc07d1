"""The public surface of kubetrain.api: pinned names, cheap import, types agree with schemas."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import typing
from typing import Any

import kubetrain.api
from kubetrain.api import labels, schema_for, types

PUBLIC = {
    # types
    "Obj", "TrainJob", "TrainJobSpec", "TrainJobStatus", "TrainingRuntime", "TrainingRuntimeSpec",
    "ClusterTrainingRuntime", "JobSet", "JobSetSpec", "JobSetStatus", "MLPolicy", "PodGroupPolicy",
    "ReplicatedJob", "RuntimePatch", "RuntimeRef", "Trainer", "TrainerStatus",
    # errors
    "ErrorType", "FieldError", "LoadError", "format_errors",
    # load / dump
    "load_objects", "load_files", "parse_documents", "dump_yaml", "dump_json", "clean",
    # schema
    "apply_defaults", "prune_unknown", "schema_errors", "validate_object", "drop_nulls",
    "crd_manifests", "crd_for", "schema_for", "served_kinds",
    # quantities
    "Quantity", "parse_quantity", "is_quantity", "compare_quantities", "quantity_value",
    "quantity_milli_value", "canonical_quantity",
}  # fmt: skip


def test_the_public_names_are_pinned() -> None:
    assert set(kubetrain.api.__all__) == PUBLIC | set(labels.__all__)
    for name in kubetrain.api.__all__:
        assert getattr(kubetrain.api, name) is not None


def test_every_module_declares_all() -> None:
    for info in pkgutil.iter_modules(kubetrain.api.__path__):
        module = importlib.import_module(f"kubetrain.api.{info.name}")
        assert isinstance(getattr(module, "__all__", None), list), info.name


def test_importing_the_package_parses_nothing_and_skips_yaml() -> None:
    code = (
        "import sys, kubetrain.api as a; "
        "heavy = [m for m in ('yaml', 'kubetrain.api.schema', 'kubetrain.api.types', "
        "'kubetrain.api.load', 'kubetrain.api.quantity') if m in sys.modules]; "
        "print(heavy); a.TRAINER_API_VERSION"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_constants() -> None:
    assert kubetrain.api.TRAINER_API_VERSION == "trainer.kubeflow.org/v1alpha1"
    assert kubetrain.api.JOBSET_API_VERSION == "jobset.x-k8s.io/v1alpha2"
    assert kubetrain.api.ANCESTOR_LABEL == "trainer.kubeflow.org/trainjob-ancestor-step"
    assert kubetrain.api.JOB_COMPLETION_INDEX == "batch.kubernetes.io/job-completion-index"


def _walk(td: Any, schema: dict[str, Any], path: str, out: list[str]) -> None:
    """Each field of our own TypedDicts must exist in the schema with the same name."""
    if not typing.is_typeddict(td) or td.__module__ != types.__name__:
        return
    props = schema.get("properties", {})
    hints = typing.get_type_hints(td, include_extras=True)
    if set(hints) != set(props):
        out.append(f"{path}: {sorted(hints)} != {sorted(props)}")
    for name, hint in hints.items():
        node = props.get(name)
        if node is None:
            continue
        inner = hint
        while True:
            origin = typing.get_origin(inner)
            if origin in (typing.Required, typing.NotRequired, typing.Annotated):
                inner = typing.get_args(inner)[0]
            elif origin is list:
                inner = typing.get_args(inner)[0]
                node = node.get("items", {})
            else:
                break
        _walk(inner, node, f"{path}.{name}", out)


def test_typed_dicts_and_generated_schemas_name_the_same_fields() -> None:
    out: list[str] = []
    for td, kind, api in [
        (types.TrainJob, "TrainJob", "trainer.kubeflow.org/v1alpha1"),
        (types.TrainingRuntime, "TrainingRuntime", "trainer.kubeflow.org/v1alpha1"),
        (types.JobSet, "JobSet", "jobset.x-k8s.io/v1alpha2"),
    ]:
        schema = json.loads(json.dumps(schema_for(api, kind)))
        _walk(td, schema, kind, out)
    assert out == []
