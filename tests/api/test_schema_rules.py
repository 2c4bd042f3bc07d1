"""The functions the embedded API server calls: apply_defaults, prune_unknown, schema_errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api import (
    FieldError,
    apply_defaults,
    drop_nulls,
    prune_unknown,
    schema_errors,
    schema_for,
    served_kinds,
    validate_object,
)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "j"},
        "spec": {"runtimeRef": {"name": "r"}, **spec},
    }


def test_served_kinds_are_the_three_trainer_kinds_and_jobset() -> None:
    assert sorted(served_kinds()) == [
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
    ]
    assert schema_for("v1", "Pod") is None


def test_apply_defaults_fills_in_place_and_returns_the_object() -> None:
    job = _job()
    assert apply_defaults(job) is job
    assert job["spec"] == {
        "runtimeRef": {
            "name": "r",
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
        },
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }


def test_apply_defaults_leaves_other_kinds_alone() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "data": {}}
    assert apply_defaults(copy.deepcopy(cm)) == cm


def test_apply_defaults_is_idempotent() -> None:
    once = apply_defaults(_job(trainer={"env": [{"name": "A"}]}))
    assert apply_defaults(copy.deepcopy(once)) == once


def test_prune_unknown_drops_unknown_fields_and_reports_their_paths() -> None:
    job = _job(trainer={"numNode": 2, "numNodes": 1}, extra={"x": 1})
    job["status"] = {"kopf": {}, "conditions": []}
    dropped = prune_unknown(job)
    assert dropped == ["spec.trainer.numNode", "spec.extra", "status.kopf"]
    assert job["spec"]["trainer"] == {"numNodes": 1}
    assert job["status"] == {"conditions": []}


def test_prune_unknown_keeps_free_form_maps() -> None:
    job = _job(trainer={"resourcesPerNode": {"limits": {"example.com/foo": 1}}})
    job["metadata"]["labels"] = {"anything/goes": "x"}
    assert prune_unknown(job) == []


SCHEMA_ERRORS: list[tuple[str, dict[str, Any], list[FieldError]]] = [
    ("a valid TrainJob has none", _job(), []),
    ("unknown fields are not schema errors (pruning handles them)", _job(bogus=1), []),
    (
        "a missing required field is Required",
        {**_job(), "spec": {"runtimeRef": {}}},
        [FieldError("spec.runtimeRef.name", "Required value", "Required")],
    ),
    (
        "an enum violation is NotSupported",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "spec": {"podGroupPolicy": {"volcano": {"networkTopology": {"mode": "loose"}}}},
        },
        [
            FieldError(
                "spec.podGroupPolicy.volcano.networkTopology.mode",
                'Unsupported value: "loose": supported values: "hard", "soft"',
                "NotSupported",
            )
        ],
    ),
    (
        "progress above 100 is out of bounds",
        {
            **_job(),
            "status": {"trainerStatus": {"progressPercentage": 101, "lastUpdatedTime": "x"}},
        },
        [
            FieldError(
                "status.trainerStatus.progressPercentage",
                "Invalid value: 101: should be less than or equal to 100",
            )
        ],
    ),
    (
        "a condition reason must match its pattern",
        {
            **_job(),
            "status": {
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "reason": "has spaces",
                        "message": "",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ]
            },
        },
        [
            FieldError(
                "status.conditions[0].reason",
                "Invalid value: \"has spaces\": should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'",
            )
        ],
    ),
    (
        "an empty runtime spec breaks minProperties",
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "spec": {}},
        [FieldError("spec", "Invalid value: 0: should have at least 1 properties")],
    ),
    (
        "a container name set with a duplicate is Duplicate",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "spec": {
                "mlPolicy": {
                    "torch": {
                        "envInjection": {
                            "targets": [{"jobName": "j", "containerNames": ["a", "a"]}]
                        }
                    }
                }
            },
        },
        [
            FieldError(
                "spec.mlPolicy.torch.envInjection.targets[0].containerNames[1]",
                'Duplicate value: "a"',
                "Duplicate",
            )
        ],
    ),
    (
        "ports are keyed by containerPort and protocol, with TCP defaulted",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "a",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {
                                                "name": "c",
                                                "ports": [
                                                    {"containerPort": 1},
                                                    {"containerPort": 1, "protocol": "TCP"},
                                                    {"containerPort": 1, "protocol": "UDP"},
                                                ],
                                            }
                                        ]
                                    }
                                }
                            }
                        },
                    }
                ]
            },
        },
        [
            FieldError(
                "spec.replicatedJobs[0].template.spec.template.spec.containers[0].ports[1]",
                'Duplicate value: {"containerPort":1,"protocol":"TCP"}',
                "Duplicate",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in SCHEMA_ERRORS], ids=[c[0] for c in SCHEMA_ERRORS]
)
def test_schema_errors(obj: dict[str, Any], expected: list[FieldError]) -> None:
    apply_defaults(obj)
    assert schema_errors(obj) == expected


def test_strict_validation_adds_unknown_fields_to_schema_errors() -> None:
    job = apply_defaults(_job(trainer={"image": 5, "imag": "x"}))
    assert [e.path for e in validate_object(job, strict=True)] == [
        "spec.trainer.image",
        "spec.trainer.imag",
    ]
    assert [e.path for e in validate_object(job, strict=False)] == ["spec.trainer.image"]


def test_drop_nulls_removes_null_map_values_everywhere() -> None:
    assert drop_nulls({"a": None, "b": {"c": None, "d": [{"e": None}]}}) == {"b": {"d": [{}]}}


def test_integers_written_as_whole_floats_are_integers() -> None:
    assert schema_errors(apply_defaults(_job(trainer={"numNodes": 2.0}))) == []
    assert [e.path for e in schema_errors(_job(trainer={"numNodes": 2.5}))] == [
        "spec.trainer.numNodes"
    ]
