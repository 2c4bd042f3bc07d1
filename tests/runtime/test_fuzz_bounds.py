"""Issue 13, fuzzing TrainJob and runtime fields (hypothesis): every input either gets field
errors from `validate_trainjob` (what ``kubetrain validate``, admission and ``kubetrain
render`` use), or renders quickly into objects whose generated names are valid and whose pod
count is bounded. Never a traceback, a hang, or an unbounded plan. The end-to-end half (a
sampled subset on the local engine) is tests/security/test_fuzz_engine.py."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from runtime_helpers import TEST_ENV

from kubetrain.api.errors import FieldError
from kubetrain.runtime import RenderError, render, validate_trainjob
from kubetrain.runtime.config import DEFAULT_MAX_NUM_NODES
from kubetrain.testing import make_runtime, make_trainjob

# Small, edge and absurd integers: the bounds are what is under test.
counts = st.one_of(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(-3, 4),
    st.sampled_from([2**31 - 1, 2**31, 10**20, -(2**31) - 1, DEFAULT_MAX_NUM_NODES, DEFAULT_MAX_NUM_NODES + 1]),
    st.integers(-(2**70), 2**70),
)  # fmt: skip
names = st.one_of(
    st.from_regex(r"[a-z]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True),
    st.text(alphabet="abz09-.", min_size=0, max_size=70),
    st.integers(1, 70).map(lambda n: "a" * n),
    st.sampled_from(["", "-a", "A", "a_b", "x" * 63, "x" * 64]),
)
job_names = st.sampled_from(["node", "launcher", "dataset-initializer", "a" * 40])


@st.composite
def runtimes(draw: st.DrawFn) -> dict[str, Any]:
    builder = make_runtime("fuzz")
    policy = draw(st.sampled_from(["torch", "mpi", "plain"]))
    if policy == "torch":
        builder.torch(numProcPerNode=draw(st.one_of(counts, st.just("auto"))))
    elif policy == "mpi":
        builder.mpi(
            numProcPerNode=draw(counts), mpiImplementation="OpenMPI", sshAuthMountPath="/root/.ssh"
        )
    if draw(st.booleans()):
        builder.num_nodes(draw(counts))
    chosen = draw(st.lists(job_names, max_size=2, unique=True))
    for name in chosen:
        ancestor = "trainer" if name == "node" else None
        replicas = draw(st.one_of(st.none(), counts))
        builder.job(name, ancestor=ancestor, command=["true"], replicas=replicas,
                    parallelism=draw(st.one_of(st.none(), counts)))  # fmt: skip
    runtime = builder.obj()
    if not chosen:
        runtime["spec"]["template"]["spec"]["replicatedJobs"] = []
    return runtime


@st.composite
def trainjobs(draw: st.DrawFn) -> dict[str, Any]:
    builder = make_trainjob(draw(names)).runtime("fuzz").uid("fuzz-uid")
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["num_nodes"] = draw(counts)
    if draw(st.booleans()):
        fields["num_proc_per_node"] = draw(counts)
    return builder.trainer(**fields).obj()


def _pod_names(plan_objects: list[dict[str, Any]]) -> tuple[list[str], int]:
    """Every Job name and the longest pod hostname each replicated job gets; the pod count."""
    out, pods = [], 0
    for obj in plan_objects:
        if obj.get("kind") != "JobSet":
            continue
        for rjob in obj["spec"]["replicatedJobs"]:
            replicas = int(rjob.get("replicas", 1))
            spec = rjob["template"]["spec"]
            per_job = int(spec.get("completions") or spec.get("parallelism") or 1)
            pods += replicas * per_job
            job = f"{obj['metadata']['name']}-{rjob['name']}-{replicas - 1}"
            out += [job, f"{job}-{per_job - 1}"]
    return out, pods


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=trainjobs(), runtime=runtimes())
def test_every_input_gets_field_errors_or_a_bounded_runnable_plan(
    job: dict[str, Any], runtime: dict[str, Any]
) -> None:
    started = time.monotonic()
    errors = validate_trainjob(job, runtime, environment=TEST_ENV).errors
    assert all(isinstance(e, FieldError) and e.reason for e in errors), errors
    if errors:
        event("refused with field errors")
        return
    try:
        plan = render(job, runtime, environment=TEST_ENV)
    except RenderError as exc:
        assert exc.errors and all(e.reason for e in exc.errors)
        event("admitted, refused by render")
        return
    event("admitted and rendered")
    names, pods = _pod_names(plan.objects)
    assert all(len(n) <= 63 for n in names), names
    # Each replicated job runs at most the limit (the runtimes here have at most two).
    assert 1 <= pods <= 2 * DEFAULT_MAX_NUM_NODES, pods
    # A request that could be admitted never makes validation plus render slow.
    assert time.monotonic() - started < 5
