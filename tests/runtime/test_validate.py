"""Admission: every rule of trainer v2.3.0 pkg/webhooks/ as (path, reason), all errors at once."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import load_upstream_runtime

from kubetrain.api.errors import FieldError
from kubetrain.runtime import validate_runtime, validate_trainjob
from kubetrain.testing import make_runtime, make_trainjob

Obj = dict[str, Any]
TORCH = load_upstream_runtime("torch_distributed")
MOUNT = [{"name": "initializer", "mountPath": "/workspace"}]


def pairs(errors: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.path, e.reason) for e in errors]


def initializer_runtime(*, ds_mount: bool = True, ds_container: str = "dataset-initializer") -> Obj:
    return (
        make_runtime()
        .torch()
        .job(
            "dataset-initializer",
            ancestor="dataset-initializer",
            container=ds_container,
            volume_mounts=MOUNT if ds_mount else None,
        )
        .job("node", ancestor="trainer", init_containers=[{"name": "warmup", "image": "x"}])
        .obj()
    )


CREATE_CASES = [
    pytest.param(
        make_trainjob("ok").trainer(num_nodes=2).obj(),
        TORCH,
        [],
        id="a plain torch job is admitted",
    ),
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
        initializer_runtime(),
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
        initializer_runtime(),
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
    pytest.param(
        make_trainjob().dataset("hf://x").model("hf://y").obj(),
        TORCH,
        [
            (
                "spec.runtimeRef",
                "must have dataset-initializer job when trainJob is configured with input datasetConfig",
            ),
            (
                "spec.runtimeRef",
                "must have model-initializer job when trainJob is configured with input modelConfig",
            ),
        ],
        id="initializers need their jobs",
    ),
    pytest.param(
        make_trainjob().dataset("hf://x").obj(),
        initializer_runtime(ds_container="other"),
        [
            (
                "spec.runtimeRef",
                "must have container with name - dataset-initializer in the dataset-initializer job",
            )
        ],
        id="dataset initializer needs its container",
    ),
    pytest.param(
        make_trainjob().dataset("hf://x").obj(),
        initializer_runtime(ds_mount=False),
        [
            (
                "spec.runtimeRef",
                "must have volumeMount with name - initializer in container dataset-initializer of the"
                " dataset-initializer job",
            )
        ],
        id="dataset initializer needs the initializer mount (v2.3)",
    ),
    pytest.param(
        make_trainjob().pod_patch("kueue.k8s.io/", "node", {"nodeSelector": {"a": "b"}}).obj(),
        TORCH,
        [("spec.runtimePatches.manager", 'must be a domain-prefixed path (such as "acme.io/foo")')],
        id="patch manager needs a path after the domain",
    ),
    pytest.param(
        make_trainjob()
        .pod_patch("kueue.k8s.io/manager", "node", {"nodeSelector": {"a": "b"}})
        .obj(),
        TORCH,
        [],
        id="a domain-prefixed manager is fine",
    ),
    pytest.param(
        make_trainjob().pod_patch("a.io/m", "launcher", {"nodeSelector": {"a": "b"}}).obj(),
        TORCH,
        [
            (
                "spec.runtimePatches",
                "must not have replicated job that doesn't exist in the runtime job template",
            )
        ],
        id="patched job must exist in the runtime",
    ),
    pytest.param(
        make_trainjob().pod_patch("a.io/m", "node", {"containers": [{"name": "side"}]}).obj(),
        TORCH,
        [
            (
                "spec.runtimePatches",
                "must not have container that doesn't exist in the runtime job node",
            )
        ],
        id="patched container must exist",
    ),
    pytest.param(
        make_trainjob().pod_patch("a.io/m", "node", {"initContainers": [{"name": "nope"}]}).obj(),
        initializer_runtime(),
        [
            (
                "spec.runtimePatches",
                "must not have initContainer that doesn't exist in the runtime job node",
            )
        ],
        id="patched init container must exist",
    ),
    pytest.param(
        make_trainjob().pod_patch("a.io/m", "node", {"initContainers": [{"name": "warmup"}]}).obj(),
        initializer_runtime(),
        [],
        id="init and regular container names are pooled",
    ),
    pytest.param(
        make_trainjob()
        .pod_patch("a.io/m", "node", {"containers": [{"name": "node", "env": [{"name": "X"}]}]})
        .obj(),
        TORCH,
        [
            (
                "spec.runtimePatches",
                "must not have envs for the dataset-initializer, model-initializer, node containers",
            )
        ],
        id="patches must not set env on node",
    ),
    pytest.param(
        make_trainjob()
        .trainer(env={"PET_NODE_RANK": "0", "PET_MASTER_PORT": "1", "OK": "1"})
        .obj(),
        TORCH,
        [
            (
                "spec.trainer.env",
                "must not have reserved envs, invalid envs configured: [PET_MASTER_PORT PET_NODE_RANK]",
            )
        ],
        id="torch reserved envs are listed sorted",
    ),
    pytest.param(
        make_trainjob().trainer().obj(),
        make_runtime()
        .torch(envInjection={"targets": [{"jobName": "node", "containerNames": ["ghost"]}]})
        .job("node", ancestor="trainer")
        .obj(),
        [
            (
                "spec.runtimeRef",
                'envInjection target podSet "node" container "ghost" not found in runtime template',
            )
        ],
        id="envInjection targets must exist",
    ),
    pytest.param(
        make_trainjob()
        .runtime("xgboost-distributed")
        .trainer(env={"A": "1", "DMLC_TASK_ID": "3"})
        .obj(),
        load_upstream_runtime("xgboost_distributed"),
        [("spec.trainer.env[1]", "DMLC_TASK_ID is reserved for the XGBoost runtime")],
        id="xgboost reserved env is indexed",
    ),
    pytest.param(
        make_trainjob()
        .runtime("torchtune-qwen2.5-1.5b")
        .trainer(command=["tune", "run"], args=["output_dir=/x"])
        .obj(),
        load_upstream_runtime("qwen2_5_1.5B"),
        [
            (
                "spec.trainer.args[0]",
                'must not set immutable config "output_dir" in trainer args; it is managed by the runtime',
            )
        ],
        id="torchtune managed keys are immutable",
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


# --- plugin validators wired through validate_trainjob (MPI, Flux, Volcano) ---------------------

DEEPSPEED = load_upstream_runtime("deepspeed_distributed")


def mpi_launcher_only() -> Obj:
    return (
        make_runtime("mpi-one")
        .mpi(
            numProcPerNode=1,
            mpiImplementation="OpenMPI",
            sshAuthMountPath="/root/.ssh",
            runLauncherAsNode=True,
        )
        .job("launcher", ancestor="trainer")
        .obj()
    )


def flux_runtime(**job: Any) -> Obj:
    return make_runtime("flux").flux(numProcPerNode=1).job("node", ancestor="trainer", **job).obj()


def volcano_runtime(queue: str | None, priority: str | None) -> Obj:
    builder = make_runtime("v").torch().pod_group("volcano")
    if queue is not None:
        builder = builder.template_metadata(annotations={"scheduling.volcano.sh/queue-name": queue})
    rt = builder.job("node", ancestor="trainer").obj()
    if priority is not None:
        rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "priorityClassName"
        ] = priority
    return rt


@pytest.mark.parametrize(
    ("job", "runtime", "kwargs", "expected"),
    [
        pytest.param(
            make_trainjob().runtime("deepspeed-distributed").trainer(num_nodes=2).obj(),
            DEEPSPEED,
            {},
            [],
            id="deepspeed with two nodes is admitted",
        ),
        pytest.param(
            make_trainjob().runtime("mpi-one").trainer(num_nodes=2).obj(),
            mpi_launcher_only(),
            {},
            [
                (
                    "spec.trainer.numNodes",
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either"
                    " launcher and node",
                )
            ],
            id="MPI launcher-as-node needs both jobs for several nodes",
        ),
        pytest.param(
            make_trainjob()
            .runtime("deepspeed-distributed")
            .trainer(env={"OMPI_MCA_plm_rsh_args": "x", "OMPI_MCA_orte_default_hostfile": "y"})
            .obj(),
            DEEPSPEED,
            {},
            [
                (
                    "spec.trainer.env",
                    "must not have reserved envs, invalid envs configured:"
                    " [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]",
                )
            ],
            id="MPI reserved envs (v2.3)",
        ),
        pytest.param(
            make_trainjob().runtime("flux").trainer(num_nodes=1, num_proc_per_node=0).obj(),
            flux_runtime(),
            {},
            [
                (
                    "spec.trainer.numProcPerNode",
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            ],
            id="flux needs a process per node",
        ),
        pytest.param(
            make_trainjob().runtime("flux").trainer(num_nodes=1).obj(),
            flux_runtime(init_containers=[{"name": "flux-installer", "image": "x"}]),
            {},
            [("spec.trainer.initContainers", "InitContainer 'flux-installer' is reserved")],
            id="flux-installer init container is reserved",
        ),
        pytest.param(
            make_trainjob().runtime("v").obj(),
            volcano_runtime("", None),
            {},
            [
                (
                    "spec.annotations[scheduling.volcano.sh/queue-name]",
                    "Volcano queue name must not be empty",
                )
            ],
            id="volcano queue annotation must not be empty",
        ),
        pytest.param(
            make_trainjob().runtime("v").obj(),
            volcano_runtime("q", "gold"),
            {"priority_classes": ["silver"]},
            [
                (
                    "spec.templateSpec.priorityClassName",
                    'PriorityClass "gold" doesn\'t exist: priorityclasses.scheduling.k8s.io "gold" not found',
                )
            ],
            id="volcano priority class must exist",
        ),
        pytest.param(
            make_trainjob().runtime("v").obj(),
            volcano_runtime("q", "gold"),
            {},
            [],
            id="volcano priority check is skipped when classes are unknown",
        ),
    ],
)
def test_plugin_validators(
    job: Obj, runtime: Obj, kwargs: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert pairs(validate_trainjob(job, runtime, **kwargs).errors) == expected


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
