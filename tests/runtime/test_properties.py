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
