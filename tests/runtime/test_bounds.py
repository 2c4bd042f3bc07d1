"""Issue 13, findings 3 and 4: numbers and names that pass the schema but could never run are
refused with field errors by `validate_trainjob`/`validate_runtime` (``kubetrain validate``,
admission and ``kubetrain render`` all call them), and `render` refuses them again."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.runtime.config import Environment
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.framework import RenderError
from kubetrain.runtime.render import render
from kubetrain.runtime.validate import validate_runtime, validate_trainjob
from kubetrain.testing import make_runtime, make_trainjob

RUNTIMES = {r["metadata"]["name"]: r for r in default_runtimes()}
TORCH = RUNTIMES["torch-distributed"]
MPI = RUNTIMES["deepspeed-distributed"]


def _errors(job: dict[str, Any], runtime: dict[str, Any] | None, **kw: Any) -> list[str]:
    return [f"{e.path}: {e.reason}" for e in validate_trainjob(job, runtime, **kw).errors]


TRAINJOB_CASES = [
    ("finding 3: numNodes beyond any integer", {"num_nodes": 99999999999999999999}, TORCH,
     "spec.trainer.numNodes: Invalid value: 99999999999999999999: should be less than or equal to 2147483647"),
    ("finding 3: numNodes just beyond int32", {"num_nodes": 2147483648}, TORCH,
     "spec.trainer.numNodes: Invalid value: 2147483648: should be less than or equal to 2147483647"),
    ("finding 3: numNodes within int32 but beyond kubetrain's limit", {"num_nodes": 2147483647}, TORCH,
     "spec.trainer.numNodes: Invalid value: 2147483647: must be <= 1000"),
    ("finding 4: numNodes zero", {"num_nodes": 0}, TORCH,
     "spec.trainer.numNodes: Invalid value: 0: must be >= 1"),
    ("finding 4: numNodes negative", {"num_nodes": -3}, TORCH,
     "spec.trainer.numNodes: Invalid value: -3: must be >= 1"),
    ("finding 4: MPI numProcPerNode negative", {"num_proc_per_node": -4}, MPI,
     "spec.trainer.numProcPerNode: Invalid value: -4: must be >= 1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("trainer", "runtime", "expected"),
    [c[1:] for c in TRAINJOB_CASES],
    ids=[c[0] for c in TRAINJOB_CASES],
)
def test_out_of_bounds_trainer_fields_get_a_field_error(
    trainer: dict[str, Any], runtime: dict[str, Any], expected: str
) -> None:
    job = make_trainjob("j").runtime(runtime["metadata"]["name"]).trainer(**trainer).obj()
    errors = _errors(job, runtime)
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_finding_3_the_node_limit_is_configurable() -> None:
    job = make_trainjob("j").trainer(num_nodes=1500).obj()
    assert _errors(job, TORCH)
    assert _errors(job, TORCH, environment=Environment(max_num_nodes=2000)) == []


NAME_CASES = [
    ("a 50-character name fits torch's node-0-0 pods", 50, TORCH, []),
    ("finding 4: a 57-character name makes the pod hostname too long", 57, TORCH,
     ["metadata.name: Invalid value: '{name}': too long for this runtime: it would name a Job "
      "or pod '{name}-node-0-0' (66 characters; names and label values are at most 63); "
      "shorten it by 3"]),
    ("finding 4: a 63-character name is refused for MPI's launcher too", 63, MPI, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("length", "runtime", "expected"),
    [c[1:] for c in NAME_CASES],
    ids=[c[0] for c in NAME_CASES],
)
def test_names_are_checked_against_what_they_generate(
    length: int, runtime: dict[str, Any], expected: list[str] | None
) -> None:
    name = ("a" * length)[:length]
    job = make_trainjob(name).runtime(runtime["metadata"]["name"]).obj()
    errors = _errors(job, runtime)
    if expected is None:
        assert errors and all(e.startswith("metadata.name: ") for e in errors), errors
    else:
        assert errors == [e.format(name=name) for e in expected]


def test_finding_4_a_runtime_without_jobs_is_refused_at_its_admission_and_the_trainjobs() -> None:
    empty = make_runtime("empty").torch().obj()
    empty["spec"]["template"]["spec"]["replicatedJobs"] = []
    assert [str(e) for e in validate_runtime(empty).errors] == [
        "spec.template.spec.replicatedJobs: Required value: a runtime needs at least one replicated job"
    ]
    job = make_trainjob("j").runtime("empty").obj()
    assert _errors(job, empty) == [
        "spec.runtimeRef: the runtime's spec.template.spec.replicatedJobs: Required value: a "
        "runtime needs at least one replicated job"
    ]


def test_finding_4_a_runtime_with_a_negative_mpi_process_count_is_refused() -> None:
    runtime = make_runtime("m").mpi(numProcPerNode=-4).job("node", ancestor="trainer").obj()
    assert [e.path for e in validate_runtime(runtime).errors] == [
        "spec.mlPolicy.mpi.numProcPerNode"
    ]


@pytest.mark.parametrize(
    "num_nodes", [2147483647, 0], ids=["finding 3: two billion nodes", "finding 4: zero nodes"]
)
def test_render_refuses_what_admission_would_have_refused(num_nodes: int) -> None:
    # A job stored before the rule (or through a path without admission) fails, fast.
    job = make_trainjob("j").uid("u").trainer(num_nodes=num_nodes).obj()
    with pytest.raises(RenderError) as refused:
        render(job, TORCH)
    assert [e.path for e in refused.value.errors] == ["spec.trainer.numNodes"]
