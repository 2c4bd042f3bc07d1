"""Hypothesis: random and malformed TrainJobs never raise anything but FieldError-carrying errors."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runtime_helpers import TEST_ENV, load_upstream_runtime

from kubetrain.api.errors import FieldError
from kubetrain.runtime import RenderError, render, validate_trainjob

RUNTIMES = [
    load_upstream_runtime(n)
    for n in ("torch_distributed", "deepspeed_distributed", "llama3_2_1B", "xgboost_distributed")
]

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 70), st.text(max_size=8), st.floats(allow_nan=False)
)
junk = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
names = st.sampled_from(["node", "launcher", "dataset-initializer", "x", ""])
env = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["A", "PET_NNODES", "DMLC_TASK_ID", ""]),
            "value": st.text(max_size=4),
        }
    ),
    max_size=3,
)
trainer = st.fixed_dictionaries(
    {},
    optional={
        "numNodes": st.one_of(st.integers(-2, 5), junk),
        "numProcPerNode": st.one_of(st.integers(-1, 4), junk),
        "image": st.one_of(st.text(max_size=10), junk),
        "command": st.one_of(
            st.just(["tune", "run"]), st.lists(st.text(max_size=5), max_size=3), junk
        ),
        "args": st.one_of(st.lists(st.text(max_size=12), max_size=3), junk),
        "env": st.one_of(env, junk),
        "resourcesPerNode": st.one_of(
            st.fixed_dictionaries(
                {
                    "limits": st.dictionaries(
                        st.sampled_from(["cpu", "nvidia.com/gpu", "memory"]),
                        st.one_of(st.integers(0, 8), st.text(max_size=4)),
                        max_size=2,
                    )
                }
            ),
            junk,
        ),
    },
)
patch = st.fixed_dictionaries(
    {"manager": st.sampled_from(["a.io/m", "bad", "", "x.y/"])},
    optional={
        "trainingRuntimeSpec": st.one_of(
            junk,
            st.fixed_dictionaries(
                {
                    "template": st.fixed_dictionaries(
                        {
                            "spec": st.fixed_dictionaries(
                                {
                                    "replicatedJobs": st.lists(
                                        st.fixed_dictionaries(
                                            {"name": names}, optional={"template": junk}
                                        ),
                                        max_size=2,
                                    )
                                }
                            )
                        }
                    )
                }
            ),
        )
    },
)
spec = st.fixed_dictionaries(
    {
        "runtimeRef": st.one_of(
            st.fixed_dictionaries({"name": st.sampled_from(["torch-distributed", "x"])}), junk
        )
    },
    optional={
        "trainer": st.one_of(trainer, junk),
        "suspend": st.one_of(st.booleans(), junk),
        "runtimePatches": st.one_of(st.lists(patch, max_size=2), junk),
        "initializer": junk,
        "activeDeadlineSeconds": st.one_of(st.integers(-1, 5), junk),
        "managedBy": junk,
    },
)
trainjob = st.fixed_dictionaries(
    {
        "apiVersion": st.just("trainer.kubeflow.org/v1alpha1"),
        "kind": st.just("TrainJob"),
        "metadata": st.one_of(
            st.fixed_dictionaries({"name": st.sampled_from(["j", "Bad", "a-b"])}), junk
        ),
        "spec": st.one_of(spec, junk),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=trainjob, runtime=st.sampled_from(RUNTIMES))
def test_validate_only_reports_field_errors(job: dict[str, Any], runtime: dict[str, Any]) -> None:
    verdict = validate_trainjob(job, runtime)
    assert all(isinstance(e, FieldError) for e in verdict.errors)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=trainjob, runtime=st.sampled_from(RUNTIMES))
def test_render_of_admitted_jobs_never_crashes(
    job: dict[str, Any], runtime: dict[str, Any]
) -> None:
    if not validate_trainjob(job, runtime).ok:
        return
    try:
        plan = render(job, runtime, environment=TEST_ENV)
    except RenderError as exc:
        assert all(isinstance(e, FieldError) for e in exc.errors)
        return
    assert isinstance(plan.objects, list)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=trainjob, runtime=st.sampled_from(RUNTIMES))
def test_render_of_unvalidated_junk_fails_only_with_render_errors(
    job: dict[str, Any], runtime: dict[str, Any]
) -> None:
    try:
        render(job, runtime, environment=TEST_ENV)
    except RenderError as exc:
        assert all(isinstance(e, FieldError) for e in exc.errors)


runtime_doc = st.fixed_dictionaries(
    {
        "apiVersion": st.just("trainer.kubeflow.org/v1alpha1"),
        "kind": st.sampled_from(["ClusterTrainingRuntime", "TrainingRuntime"]),
        "metadata": st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["r", "x"])}), junk),
        "spec": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "mlPolicy": st.one_of(
                        st.dictionaries(
                            st.sampled_from(["torch", "mpi", "jax", "flux", "numNodes"]),
                            junk,
                            max_size=3,
                        ),
                        junk,
                    ),
                    "podGroupPolicy": junk,
                    "template": st.one_of(
                        st.fixed_dictionaries(
                            {
                                "spec": st.fixed_dictionaries(
                                    {
                                        "replicatedJobs": st.lists(
                                            st.fixed_dictionaries(
                                                {"name": names},
                                                optional={"replicas": junk, "template": junk},
                                            ),
                                            max_size=3,
                                        )
                                    }
                                )
                            }
                        ),
                        junk,
                    ),
                },
            ),
            junk,
        ),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runtime=runtime_doc, job=trainjob)
def test_junk_runtimes_give_field_errors_and_never_crash_render(
    runtime: dict[str, Any], job: dict[str, Any]
) -> None:
    from kubetrain.runtime import validate_runtime

    verdict = validate_runtime(runtime)
    assert all(isinstance(e, FieldError) for e in verdict.errors)
    try:
        render(job, runtime, environment=TEST_ENV)
    except RenderError as exc:
        assert all(isinstance(e, FieldError) for e in exc.errors)


# --- well-typed random TrainJobs: admission decides, and admitted jobs always render ------------

quantity = st.one_of(
    st.integers(0, 16),
    st.sampled_from(["500m", "1", "2Gi", "1.5", "0"]),
    st.floats(0, 8).map(lambda f: round(f, 1)),
)
well_typed_trainer = st.fixed_dictionaries(
    {},
    optional={
        "numNodes": st.integers(1, 6),
        "numProcPerNode": st.integers(1, 4),
        "image": st.sampled_from(["img:1", "ghcr.io/x/y:2"]),
        "command": st.sampled_from([["python", "t.py"], ["tune", "run"], ["torchrun", "a.py"]]),
        "args": st.lists(
            st.sampled_from(["--x", "epochs=1", "model.lora_attn_modules=[q]"]), max_size=3
        ),
        "env": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["A", "B", "NCCL_DEBUG"]),
                    "value": st.text("abc", max_size=3),
                }
            ),
            max_size=3,
            unique_by=lambda e: e["name"],
        ),
        "resourcesPerNode": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantity, max_size=3
                ),
                "requests": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantity, max_size=3
                ),
            },
        ),
    },
)
well_typed_patch = st.fixed_dictionaries(
    {
        "manager": st.sampled_from(["kueue.x-k8s.io/manager", "a.io/b"]),
        "trainingRuntimeSpec": st.fixed_dictionaries(
            {
                "template": st.fixed_dictionaries(
                    {},
                    optional={
                        "metadata": st.fixed_dictionaries(
                            {
                                "labels": st.dictionaries(
                                    st.sampled_from(["a", "b"]),
                                    st.sampled_from(["x", "y"]),
                                    max_size=2,
                                )
                            }
                        ),
                        "spec": st.fixed_dictionaries(
                            {
                                "replicatedJobs": st.lists(
                                    st.fixed_dictionaries(
                                        {
                                            "name": st.sampled_from(["node", "launcher"]),
                                            "template": st.fixed_dictionaries(
                                                {
                                                    "spec": st.fixed_dictionaries(
                                                        {
                                                            "template": st.fixed_dictionaries(
                                                                {
                                                                    "spec": st.fixed_dictionaries(
                                                                        {
                                                                            "nodeSelector": st.dictionaries(
                                                                                st.sampled_from(
                                                                                    ["pool", "zone"]
                                                                                ),
                                                                                st.sampled_from(
                                                                                    ["a", "b"]
                                                                                ),
                                                                                max_size=2,
                                                                            )
                                                                        }
                                                                    )
                                                                }
                                                            )
                                                        }
                                                    )
                                                }
                                            ),
                                        }
                                    ),
                                    max_size=2,
                                    unique_by=lambda j: j["name"],
                                )
                            }
                        ),
                    },
                )
            }
        ),
    }
)
well_typed_job = st.builds(
    lambda name, runtime, trainer, patches, suspend: {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns", "uid": "u-1"},
        "spec": {
            "runtimeRef": {"name": runtime},
            **({"trainer": trainer} if trainer is not None else {}),
            **({"runtimePatches": patches} if patches else {}),
            "suspend": suspend,
        },
    },
    st.sampled_from(["j", "job-1"]),
    st.sampled_from(
        [
            "torch-distributed",
            "deepspeed-distributed",
            "torchtune-llama3.2-1b",
            "xgboost-distributed",
        ]
    ),
    st.one_of(st.none(), well_typed_trainer),
    st.lists(well_typed_patch, max_size=2, unique_by=lambda p: p["manager"]),
    st.booleans(),
)
_BY_NAME = {r["metadata"]["name"]: r for r in RUNTIMES}
_VALIDATOR: list[Any] = []


def _jobset_validator() -> Any:
    if not _VALIDATOR:
        import jsonschema
        import yaml

        from upstream_data import jobset_crd

        with jobset_crd().open() as f:
            crd = yaml.load(f, Loader=yaml.CSafeLoader)
        schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")["schema"][
            "openAPIV3Schema"
        ]
        _VALIDATOR.append(jsonschema.Draft7Validator(schema))
    return _VALIDATOR[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=well_typed_job)
def test_admitted_well_typed_jobs_render_valid_jobsets(job: dict[str, Any]) -> None:
    runtime = _BY_NAME[job["spec"]["runtimeRef"]["name"]]
    verdict = validate_trainjob(job, runtime)
    if not verdict.ok:
        return
    plan = render(job, runtime, environment=TEST_ENV)
    (js,) = [o for o in plan.objects if o["kind"] == "JobSet"]
    assert not list(_jobset_validator().iter_errors(js))
    assert js["spec"]["suspend"] is job["spec"]["suspend"]


condition = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Suspended", "Complete", "Failed", "Completed", "Other"]),
        "status": st.sampled_from(["True", "False", "Unknown"]),
    },
    optional={
        "reason": st.sampled_from(["DeadlineExceeded", "FailedJobs", "Resumed", "Suspended"]),
        "lastTransitionTime": st.sampled_from(["2026-01-01T00:00:00Z", "garbage", ""]),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    conditions=st.lists(condition, max_size=4, unique_by=lambda c: c["type"]),
    js_conditions=st.lists(condition, max_size=3, unique_by=lambda c: c["type"]),
    suspend=st.booleans(),
    deadline=st.one_of(st.none(), st.integers(1, 10**6)),
    created=st.sampled_from(["2025-12-31T23:00:00Z", None, "nonsense"]),
    jobset_present=st.booleans(),
)
def test_derive_never_raises_and_keeps_condition_types_upstreams(
    conditions: list[dict[str, Any]],
    js_conditions: list[dict[str, Any]],
    suspend: bool,
    deadline: int | None,
    created: str | None,
    jobset_present: bool,
) -> None:
    from datetime import UTC, datetime

    from kubetrain.runtime import derive

    spec: dict[str, Any] = {"runtimeRef": {"name": "x"}, "suspend": suspend}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    meta: dict[str, Any] = {"name": "j"}
    if created is not None:
        meta["creationTimestamp"] = created
    job = {"metadata": meta, "spec": spec, "status": {"conditions": conditions}}
    jobset = {"status": {"conditions": js_conditions}} if jobset_present else None
    update = derive(job, jobset, now=datetime(2026, 1, 1, 12, tzinfo=UTC))
    new_types = {c["type"] for c in update.status.get("conditions", [])} - {
        c["type"] for c in conditions
    }
    assert new_types <= {"Suspended", "Complete", "Failed"}
