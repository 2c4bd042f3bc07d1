"""load_objects / load_files: parsing, defaults, strict checks, every error at once."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import (
    DEFAULT_MANAGED_BY,
    FieldError,
    LoadError,
    load_files,
    load_objects,
    parse_documents,
)
from upstream_data import require


def _trainjob(spec: str = "", meta: str = "") -> str:
    return (
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
        f"metadata:\n  name: job{meta}\n"
        "spec:\n  runtimeRef:\n    name: torch-distributed\n" + spec
    )


def _errors(text: str) -> list[FieldError]:
    with pytest.raises(LoadError) as info:
        load_objects(text, source="test.yaml")
    assert info.value.source == "test.yaml"
    return info.value.errors


# --- upstream's own documents load cleanly ------------------------------------------------------


def test_every_sdk_trainjob_body_loads_cleanly() -> None:
    files = sorted(require("reference/sdk-trainjobs").glob("*.yaml"))
    assert len(files) == 5
    for f in files:
        (job,) = load_objects(f.read_text(), source=str(f))
        assert job["kind"] == "TrainJob"
        assert job["spec"]["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"
        assert job["spec"]["suspend"] is False
        assert job["spec"]["managedBy"] == DEFAULT_MANAGED_BY


def test_every_upstream_runtime_loads_cleanly() -> None:
    objs = load_files([require("upstream-runtimes")])
    assert len(objs) == len(list(require("upstream-runtimes").glob("*.yaml")))
    assert {o["kind"] for o in objs} == {"ClusterTrainingRuntime"}


def test_sdk_float_quantities_are_kept_as_given() -> None:
    f = require("reference/sdk-trainjobs/01-custom-trainer-torch-distributed.yaml")
    (job,) = load_objects(f.read_text(), source=str(f))
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"cpu": 2.0, "memory": "4Gi"}


# --- defaults -----------------------------------------------------------------------------------


def _runtime(spec: str) -> str:
    return (
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainingRuntime\n"
        "metadata:\n  name: rt\nspec:\n" + spec
    )


DEFAULT_CASES: list[tuple[str, str, list[tuple[str, Any]]]] = [
    (
        "a TrainJob gets runtimeRef apiGroup and kind, suspend and managedBy",
        _trainjob(),
        [
            ("spec.runtimeRef.apiGroup", "trainer.kubeflow.org"),
            ("spec.runtimeRef.kind", "ClusterTrainingRuntime"),
            ("spec.suspend", False),
            ("spec.managedBy", DEFAULT_MANAGED_BY),
        ],
    ),
    (
        "a given runtimeRef kind is kept",
        _trainjob().replace("name: torch-distributed", "name: x\n    kind: TrainingRuntime"),
        [("spec.runtimeRef.kind", "TrainingRuntime")],
    ),
    (
        "an empty mpi policy gets all four MPI defaults",
        _runtime("  mlPolicy:\n    mpi: {}\n"),
        [
            ("spec.mlPolicy.mpi.numProcPerNode", 1),
            ("spec.mlPolicy.mpi.mpiImplementation", "OpenMPI"),
            ("spec.mlPolicy.mpi.sshAuthMountPath", "/root/.ssh"),
            ("spec.mlPolicy.mpi.runLauncherAsNode", False),
        ],
    ),
    (
        "coscheduling gets a 60 second schedule timeout",
        _runtime("  podGroupPolicy:\n    coscheduling: {}\n"),
        [("spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds", 60)],
    ),
    (
        "volcano network topology gets mode hard and tier 1",
        _runtime("  podGroupPolicy:\n    volcano:\n      networkTopology: {}\n"),
        [
            ("spec.podGroupPolicy.volcano.networkTopology.mode", "hard"),
            ("spec.podGroupPolicy.volcano.networkTopology.highestTierAllowed", 1),
        ],
    ),
    (
        "flux gets one process per node",
        _runtime("  mlPolicy:\n    flux: {}\n"),
        [("spec.mlPolicy.flux.numProcPerNode", 1)],
    ),
    (
        "replicated jobs get replicas 1 and group default, ports get TCP",
        _runtime(
            "  template:\n    spec:\n      replicatedJobs:\n      - name: node\n        template:\n"
            "          spec:\n            template:\n              spec:\n                containers:\n"
            "                - name: node\n                  ports:\n                  - containerPort: 29500\n"
        ),
        [
            ("spec.template.spec.replicatedJobs.0.replicas", 1),
            ("spec.template.spec.replicatedJobs.0.groupName", "default"),
            (
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec.containers.0.ports.0.protocol",
                "TCP",
            ),
        ],
    ),
    (
        "a null field is dropped and then defaulted, like the API server does",
        _trainjob("  suspend: null\n"),
        [("spec.suspend", False)],
    ),
]


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in DEFAULT_CASES], ids=[c[0] for c in DEFAULT_CASES]
)
def test_crd_defaults_are_applied(text: str, expected: list[tuple[str, Any]]) -> None:
    (obj,) = load_objects(text, source="test.yaml")
    for path, value in expected:
        assert _get(obj, path) == value, path


def test_defaults_apply_only_where_the_parent_is_present() -> None:
    (obj,) = load_objects(_runtime("  mlPolicy:\n    torch: {}\n"), source="t")
    assert obj["spec"]["mlPolicy"] == {"torch": {}}
    assert "podGroupPolicy" not in obj["spec"]


# --- errors -------------------------------------------------------------------------------------

ERROR_CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "an unknown trainer field names its path and the nearest field",
        _trainjob("  trainer:\n    numNode: 2\n"),
        [("spec.trainer.numNode", "unknown field; did you mean numNodes?")],
    ),
    (
        "an unknown field with nothing close says only that",
        _trainjob("  zzzzzz: 1\n"),
        [("spec.zzzzzz", "unknown field")],
    ),
    (
        "a typo in metadata is caught too",
        _trainjob(meta="\n  lables: {a: b}"),
        [("metadata.lables", "unknown field; did you mean labels?")],
    ),
    (
        "a stale v2.1 field is rejected as unknown",
        _trainjob("  podTemplateOverrides: []\n"),
        [("spec.podTemplateOverrides", "unknown field")],
    ),
    (
        "a string where an integer belongs is a type error",
        _trainjob("  trainer:\n    numNodes: two\n"),
        [("spec.trainer.numNodes", 'Invalid value: "two": must be of type integer, not string')],
    ),
    (
        "a boolean is not an integer",
        _trainjob("  trainer:\n    numNodes: true\n"),
        [("spec.trainer.numNodes", "Invalid value: true: must be of type integer, not boolean")],
    ),
    (
        "an MPI implementation outside the enum is not supported",
        _runtime("  mlPolicy:\n    mpi:\n      mpiImplementation: Intel\n"),
        [
            (
                "spec.mlPolicy.mpi.mpiImplementation",
                'Unsupported value: "Intel": supported values: "OpenMPI", ""',
            )
        ],
    ),
    (
        "a missing runtimeRef name is required",
        _trainjob().replace("    name: torch-distributed\n", "    kind: TrainingRuntime\n"),
        [("spec.runtimeRef.name", "Required value")],
    ),
    (
        "an active deadline below one second is out of bounds",
        _trainjob("  activeDeadlineSeconds: 0\n"),
        [("spec.activeDeadlineSeconds", "Invalid value: 0: should be greater than or equal to 1")],
    ),
    (
        "an image longer than 500 characters is too long",
        _trainjob("  trainer:\n    image: " + "x" * 501 + "\n"),
        [("spec.trainer.image", "Too long: may not be more than 500 bytes")],
    ),
    (
        "more than 16 runtime patches are too many",
        _trainjob(
            "  runtimePatches:\n" + "".join(f"  - manager: example.com/m{i}\n" for i in range(17))
        ),
        [("spec.runtimePatches", "Too many: 17: must have at most 16 items")],
    ),
    (
        "two env vars of one name are duplicates",
        _trainjob("  trainer:\n    env:\n    - name: A\n    - name: A\n      value: b\n"),
        [("spec.trainer.env[1]", 'Duplicate value: {"name":"A"}')],
    ),
    (
        "a quantity that is not one breaks the pattern",
        _trainjob("  trainer:\n    resourcesPerNode:\n      limits:\n        cpu: 2 cores\n"),
        [("spec.trainer.resourcesPerNode.limits[cpu]", 'Invalid value: "2 cores": should match')],
    ),
    (
        "a JobSet success policy operator outside the enum is not supported",
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: j}\n"
        "spec:\n  successPolicy:\n    operator: Most\n",
        [
            (
                "spec.successPolicy.operator",
                'Unsupported value: "Most": supported values: "All", "Any"',
            )
        ],
    ),
    (
        "a typo deep in a runtime's pod template is caught",
        _runtime(
            "  template:\n    spec:\n      replicatedJobs:\n      - name: node\n        template:\n"
            "          spec:\n            template:\n              spec:\n                containers:\n"
            "                - name: node\n                  imagePullPolcy: Always\n"
        ),
        [
            (
                "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
                ".imagePullPolcy",
                "unknown field; did you mean imagePullPolicy?",
            )
        ],
    ),
    (
        "a containerPort given as a string is a type error",
        _runtime(
            "  template:\n    spec:\n      replicatedJobs:\n      - name: node\n        template:\n"
            "          spec:\n            template:\n              spec:\n                containers:\n"
            "                - name: node\n                  ports:\n                  - containerPort: '29500'\n"
        ),
        [
            (
                "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
                ".ports[0].containerPort",
                'Invalid value: "29500": must be of type integer, not string',
            )
        ],
    ),
    (
        "an unserved version of our group is not supported",
        _trainjob().replace("v1alpha1", "v1"),
        [("apiVersion", 'Unsupported value: "trainer.kubeflow.org/v1"')],
    ),
    (
        "a misspelt kind of our group gets a suggestion",
        _trainjob().replace("kind: TrainJob", "kind: TrainJobs"),
        [("kind", "did you mean TrainJob?")],
    ),
    (
        "a document without kind is rejected",
        "apiVersion: v1\nmetadata: {name: x}\n",
        [("kind", "Required value")],
    ),
    (
        "a document that is not a mapping is rejected",
        "- a\n- b\n",
        [("", "a document must be a mapping")],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_schema_violations_raise_load_error_with_paths(
    text: str, expected: list[tuple[str, str]]
) -> None:
    errors = _errors(text)
    assert [e.path for e in errors] == [p for p, _ in expected], errors
    for e, (_, reason) in zip(errors, expected, strict=True):
        assert reason in e.reason, (e.reason, reason)


def test_all_errors_are_reported_at_once() -> None:
    text = _trainjob(
        "  suspend: maybe\n  trainer:\n    numNode: 2\n    numProcPerNode: x\n  managedBy: 7\n"
    )
    paths = {e.path for e in _errors(text)}
    assert paths == {
        "spec.suspend",
        "spec.trainer.numNode",
        "spec.trainer.numProcPerNode",
        "spec.managedBy",
    }


def test_errors_in_a_multi_document_file_name_their_document() -> None:
    text = _trainjob() + "---\n" + _trainjob("  trainer:\n    numNode: 1\n")
    (error,) = _errors(text)
    assert error.path == "[1].spec.trainer.numNode"
    assert str(LoadError("f.yaml", [error])) == (
        "f.yaml: [1].spec.trainer.numNode: unknown field; did you mean numNodes?"
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: [1, 2\nb: 3\n", "line 2"),
        ("apiVersion: v1\nkind: ConfigMap\n  bad: indent\n", "line 3"),
        ("key: 'unterminated\n", "line 2"),
        ('{"a": 1', "line 1"),
        ("\t- tab\n", "line 1"),
    ],
    ids=[
        "an unclosed flow list",
        "a wrongly indented key",
        "an unterminated quote",
        "unclosed JSON (read again as YAML)",
        "a tab as indentation",
    ],
)
def test_bad_yaml_is_a_load_error_with_its_line(text: str, where: str) -> None:
    (error,) = _errors(text)
    assert error.path == ""
    assert error.reason.startswith(where), error.reason


# --- what passes through ------------------------------------------------------------------------


def test_other_kinds_pass_through_untouched() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {x: null}\nmystery: 1\n"
    (cm,) = load_objects(text, source="t")
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"x": None},
        "mystery": 1,
    }


def test_empty_documents_are_skipped_and_order_is_kept() -> None:
    text = (
        "---\n---\n"
        + _trainjob()
        + "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
    )
    assert [o["kind"] for o in load_objects(text, source="t")] == ["TrainJob", "ConfigMap"]
    assert load_objects("", source="t") == []


def test_json_input_is_read_like_yaml() -> None:
    (obj,) = load_objects(json.dumps(load_objects(_trainjob(), source="t")[0]), source="t.json")
    assert obj["spec"]["suspend"] is False


def test_a_v1_list_is_expanded_into_its_items() -> None:
    job = load_objects(_trainjob(), source="t")[0]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [job, job]})
    assert [o["kind"] for o in load_objects(text, source="t")] == ["TrainJob", "TrainJob"]


def test_timestamps_stay_strings() -> None:
    text = _trainjob(
        "  runtimePatches:\n  - manager: example.com/m\n    time: 2025-01-02T03:04:05Z\n",
        meta="\n  creationTimestamp: 2025-01-02T03:04:05Z",
    )
    (job,) = load_objects(text, source="t")
    assert job["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"
    assert job["spec"]["runtimePatches"][0]["time"] == "2025-01-02T03:04:05Z"


# --- files --------------------------------------------------------------------------------------


def test_load_files_reads_folders_sorted_and_multi_document_files(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(_trainjob().replace("name: job", "name: b"))
    (tmp_path / "a.yml").write_text(
        _trainjob().replace("name: job", "name: a1")
        + "---\n"
        + _trainjob().replace("name: job", "name: a2")
    )
    (tmp_path / "c.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    )
    (tmp_path / "notes.txt").write_text("not yaml: [")
    names = [o["metadata"]["name"] for o in load_files([tmp_path])]
    assert names == ["a1", "a2", "b", "c"]


def test_load_files_reports_every_broken_file(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_trainjob("  trainer:\n    numNode: 1\n"))
    (tmp_path / "b.yaml").write_text("a: [")
    with pytest.raises(LoadError) as info:
        load_files([tmp_path, tmp_path / "missing.yaml"])
    text = str(info.value)
    assert "a.yaml: spec.trainer.numNode: unknown field" in text
    assert "b.yaml" in text and "line" in text
    assert "missing.yaml" in text


# --- speed --------------------------------------------------------------------------------------


def test_loading_a_typical_trainjob_takes_well_under_5_ms() -> None:
    text = (require("reference/sdk-trainjobs/01-custom-trainer-torch-distributed.yaml")).read_text()
    load_objects(text, source="warm-up")
    runs = 50
    # CPU time, not wall time: the bound is about the loader, not the machine's load.
    start = time.process_time()
    for _ in range(runs):
        load_objects(text, source="t")
    per_load = (time.process_time() - start) / runs
    assert per_load < 0.005, f"{per_load * 1000:.2f} ms per TrainJob"


# --- YAML features Kubernetes treats differently from PyYAML ------------------------------------

YAML_CASES = [
    (
        "a key given twice is an error, as in kubectl",
        "a: 1\na: 2\n",
        "line 2, column 1: duplicate key 'a'",
    ),
    (
        "a self-referential alias is an error",
        "apiVersion: v1\nkind: X\na: &x [*x]\n",
        "a YAML alias refers to a value that contains it",
    ),
    (
        "an alias bomb is an error",
        "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
        + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 10) + "]\n"
            for i in range(8)
        ),
        "too many values once aliases are expanded",
    ),
]


@pytest.mark.parametrize(
    ("text", "reason"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES]
)
def test_yaml_that_cannot_be_an_object_is_rejected(text: str, reason: str) -> None:
    (error,) = _errors(text)
    assert error.reason.startswith(reason), error.reason


def test_aliases_become_independent_copies() -> None:
    text = (
        _trainjob("  trainer:\n    env: &e\n    - name: A\n")
        + "  initializer:\n    dataset:\n      env: *e\n"
    )
    (job,) = load_objects(text, source="t")
    job["spec"]["trainer"]["env"].append({"name": "B"})
    assert job["spec"]["initializer"]["dataset"]["env"] == [{"name": "A"}]


def test_merge_keys_may_be_overridden() -> None:
    (obj,) = load_objects("apiVersion: v1\nkind: X\n<<: {a: 1, b: 1}\na: 2\n", source="t")
    assert obj == {"apiVersion": "v1", "kind": "X", "a": 2, "b": 1}


def test_absurdly_deep_nesting_is_a_load_error() -> None:
    deep = "[" * 900 + "]" * 900
    text = json.dumps({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"})
    text = text[:-1] + ', "spec": {"x": ' + deep + "}}"
    with pytest.raises(LoadError):
        load_objects(text, source="t")
    with pytest.raises(LoadError):
        load_objects("a: " + "[" * 5000 + "]" * 5000, source="t")


@pytest.mark.parametrize(
    "value", ["2001-12-14", "2001-12-14 ---"], ids=["a valid one", "a malformed one"]
)
def test_an_explicit_timestamp_tag_stays_its_text(value: str) -> None:
    # PyYAML would build a datetime, or crash on a malformed value.
    assert parse_documents(f"x: !!timestamp {value}\n", source="t") == [{"x": value}]
