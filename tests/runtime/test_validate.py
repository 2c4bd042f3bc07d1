"""Admission: every rule of trainer v2.3.0 pkg/webhooks/ as (path, reason), all errors at once."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import admission_initializer_runtime, load_upstream_runtime

from kubetrain.api.errors import FieldError
from kubetrain.runtime import validate_runtime, validate_trainjob
from kubetrain.testing import make_runtime, make_trainjob

Obj = dict[str, Any]
TORCH = load_upstream_runtime("torch_distributed")


def pairs(errors: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.path, e.reason) for e in errors]


CREATE_CASES = [
    pytest.param(
        make_trainjob("Bad_Name").obj(),
        TORCH,
        [("<nil>", "metadata.name must match RFC 1035 DNS label format")],
        id="name must be an RFC 1035 label",
    ),
    pytest.param(
        make_trainjob("a" * 64).obj(),
        TORCH,
        [("<nil>", "metadata.name must be no more than 63 characters")],
        id="name is at most 63 characters",
    ),
    pytest.param(
        make_trainjob().managed_by("someone/else").obj(),
        TORCH,
        [
            (
                "spec.managedBy",
                "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
            )
        ],
        id="managedBy is one of two values",
    ),
    pytest.param(
        make_trainjob().dataset("not a uri").obj(),
        admission_initializer_runtime(),
        [
            (
                "spec.initializer.dataset.storageUri",
                "storageUri may be empty, or it must be a valid URI (scheme://...)",
            )
        ],
        id="storageUri must look like scheme://",
    ),
    pytest.param(
        make_trainjob().dataset("").obj(),
        admission_initializer_runtime(),
        [],
        id="empty storageUri is allowed",
    ),
    pytest.param(
        make_trainjob().runtime("r", kind="Foo", api_group="example.com").obj(),
        None,
        [("", "unsupported runtime: Foo.example.com")],
        id="unknown runtime kind is unsupported",
    ),
    pytest.param(
        make_trainjob().runtime("gone").obj(),
        None,
        [
            (
                "spec.RuntimeRef",
                'clustertrainingruntimes.trainer.kubeflow.org "gone" not found: specified clusterTrainingRuntime'
                " must be created before the TrainJob is created",
            )
        ],
        id="missing ClusterTrainingRuntime names spec.RuntimeRef with a capital R",
    ),
    pytest.param(
        make_trainjob().runtime("gone", kind="TrainingRuntime").obj(),
        None,
        [
            (
                "spec.runtimeRef",
                'trainingruntimes.trainer.kubeflow.org "gone" not found: specified trainingRuntime must be'
                " created before the TrainJob is created",
            )
        ],
        id="missing TrainingRuntime",
    ),
]


@pytest.mark.parametrize(("job", "runtime", "expected"), CREATE_CASES)
def test_create(job: Obj, runtime: Obj | None, expected: list[tuple[str, str]]) -> None:
    assert pairs(validate_trainjob(job, runtime).errors) == expected


def test_schema_errors_come_alone_before_webhooks() -> None:
    job = make_trainjob().deadline(0).trainer(env={"PET_NNODES": "1"}).obj()
    errors = validate_trainjob(job, TORCH).errors
    assert [e.path for e in errors] == ["spec.activeDeadlineSeconds"]


def test_deprecated_cluster_runtime_warns() -> None:
    rt = (
        make_runtime("old")
        .torch()
        .label("trainer.kubeflow.org/support", "deprecated")
        .job("node", ancestor="trainer")
    )
    verdict = validate_trainjob(make_trainjob().runtime("old").obj(), rt.obj())
    assert verdict.ok
    assert verdict.warnings == [
        'Referenced ClusterTrainingRuntime "old" is deprecated and will be removed in a future release of Kubeflow'
        " Trainer. See runtime deprecation policy:"
        " https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
    ]


# --- UPDATE -------------------------------------------------------------------------------------

BASE = make_trainjob().trainer(num_nodes=1).deadline(60)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            BASE.obj(),
            make_trainjob().trainer(num_nodes=2).deadline(60).obj(),
            [("spec.trainer", "field is immutable")],
            id="trainer is immutable",
        ),
        pytest.param(
            BASE.obj(),
            make_trainjob().trainer(num_nodes=1).deadline(61).obj(),
            [("spec.activeDeadlineSeconds", "field is immutable")],
            id="activeDeadlineSeconds is immutable",
        ),
        pytest.param(
            make_trainjob().obj(),
            make_trainjob().trainer(num_nodes=3).obj(),
            [],
            id="adding trainer where there was none passes the transition rule",
        ),
        pytest.param(
            BASE.obj(),
            make_trainjob().runtime("other").trainer(num_nodes=1).deadline(60).obj(),
            [("spec.runtimeRef", "field is immutable")],
            id="runtimeRef is immutable",
        ),
        pytest.param(
            BASE.obj(),
            make_trainjob().trainer(num_nodes=1).deadline(60).suspend().obj(),
            [],
            id="suspend is mutable",
        ),
        pytest.param(
            make_trainjob().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "1"}}).obj(),
            make_trainjob().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "2"}}).obj(),
            [
                (
                    "spec.runtimePatches",
                    "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
                )
            ],
            id="patches change only around a suspension",
        ),
        pytest.param(
            make_trainjob()
            .suspend()
            .pod_patch("a.io/m", "node", {"nodeSelector": {"a": "1"}})
            .obj(),
            make_trainjob()
            .suspend(False)
            .pod_patch("a.io/m", "node", {"nodeSelector": {"a": "2"}})
            .obj(),
            [],
            id="patch change with unsuspend in one update (v2.3)",
        ),
        pytest.param(
            make_trainjob()
            .suspend()
            .pod_patch("a.io/m", "node", {"serviceAccountName": "a"})
            .obj(),
            make_trainjob()
            .suspend()
            .pod_patch("a.io/m", "node", {"serviceAccountName": "b"})
            .obj(),
            [
                (
                    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec"
                    ".template.spec.serviceAccountName",
                    "field is immutable",
                )
            ],
            id="patched serviceAccountName is immutable",
        ),
    ],
)
def test_update(old: Obj, new: Obj, expected: list[tuple[str, str]]) -> None:
    assert pairs(validate_trainjob(new, TORCH, old=old).errors) == expected


def test_patch_change_while_a_job_is_active_is_forbidden() -> None:
    old = make_trainjob().suspend().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "1"}}).obj()
    new = make_trainjob().suspend().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "2"}}).obj()
    js = {"status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}
    errors = validate_trainjob(new, TORCH, old=old, jobset=js).errors
    assert [(e.path, e.reason, e.type) for e in errors] == [
        (
            "spec.runtimePatches",
            "RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active",
            "Forbidden",
        )
    ]


# --- runtimes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        pytest.param(TORCH, [], id="upstream torch runtime is valid"),
        pytest.param(
            make_runtime().torch().jax().job("node", ancestor="trainer").obj(),
            [("spec.mlPolicy", "Only one of the policy can be configured")],
            id="only one ML policy",
        ),
        pytest.param(
            make_runtime().flux(numProcPerNode=0).job("node", ancestor="trainer").obj(),
            [("spec.mlPolicy.flux.numProcPerNode", "NumProcPerNode in fluxPolicy must be >= 1")],
            id="flux needs at least one process",
        ),
        pytest.param(
            make_runtime()
            .torch(envInjection={"targets": [{"jobName": "node", "containerNames": ["node"]}]})
            .job("node", ancestor="trainer")
            .obj(),
            [
                (
                    "spec.mlPolicy.torch.envInjection.targets[0].containerNames",
                    "containerNames must not include the main node container because PET_* envs are always"
                    " injected into it",
                )
            ],
            id="envInjection must not name node",
        ),
        pytest.param(
            make_runtime().torch().job("node", ancestor="trainer", replicas=2).obj(),
            [("spec.template.spec.replicatedJobs[0].replicas", "always must be 1")],
            id="ancestor jobs have one replica",
        ),
        pytest.param(
            make_runtime().torch().job("node", ancestor="trainer", container="main").obj(),
            [
                (
                    "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers",
                    "must contain the required container for the ancestor: trainer",
                )
            ],
            id="trainer job needs container node",
        ),
    ],
)
def test_runtime(runtime: Obj, expected: list[tuple[str, str]]) -> None:
    assert pairs(validate_runtime(runtime).errors) == expected


def test_training_runtime_update_skips_the_webhook() -> None:
    rt = (
        make_runtime("r", kind="TrainingRuntime")
        .torch()
        .job("node", ancestor="trainer", replicas=2)
        .obj()
    )
    assert validate_runtime(rt, old=rt, operation="UPDATE").ok
    assert not validate_runtime(rt, operation="CREATE").ok


def test_deprecated_cluster_runtime_create_warns() -> None:
    rt = (
        make_runtime("old")
        .torch()
        .label("trainer.kubeflow.org/support", "deprecated")
        .job("node", ancestor="trainer")
    )
    assert (
        validate_runtime(rt.obj())
        .warnings[0]
        .startswith('ClusterTrainingRuntime "old" is deprecated')
    )


# --- mutating webhook ---------------------------------------------------------------------------


def test_default_trainjob_stamps_patch_times() -> None:
    from datetime import UTC, datetime

    from kubetrain.runtime.validate import default_trainjob

    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    job = make_trainjob().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "1"}}).obj()
    created = default_trainjob(job, now=t1)
    assert created["spec"]["runtimePatches"][0]["time"] == "2026-01-01T00:00:00Z"
    assert "time" not in job["spec"]["runtimePatches"][0]  # the input is not touched
    same = default_trainjob(
        make_trainjob().pod_patch("a.io/m", "node", {"nodeSelector": {"a": "1"}}).obj(),
        old=created,
        now=t2,
    )
    assert same["spec"]["runtimePatches"][0]["time"] == "2026-01-01T00:00:00Z"
    changed = default_trainjob(
        make_trainjob()
        .pod_patch("a.io/m", "node", {"nodeSelector": {"a": "2"}})
        .pod_patch("b.io/new", "node", {"nodeSelector": {"b": "1"}})
        .obj(),
        old=created,
        now=t2,
    )
    assert [p["time"] for p in changed["spec"]["runtimePatches"]] == ["2026-02-01T00:00:00Z"] * 2
