"""upgrade-check: what Trainer v2.0-v2.2 manifests hit on v2.3 (reference §6.3), and --fix.

Upstream's own v2.x runtimes (tests/migrate/upstream/v2x) are checked as shipped; TrainJobs in
the v2.0/v2.1 shapes (§6.2) are written here, since upstream published none outside proposals.
A fixed manifest must pass kubetrain's admission and render the pods the old one meant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from migrate_helpers import UPSTREAM_V2X, container, env_of, load, pods, upstream_errors

from kubetrain.cli.main import main
from kubetrain.migrate import Severity, upgrade_check, upgrade_fix
from kubetrain.migrate.admit import admission_errors, find_runtime

UPSTREAM = [
    ("v2.0-torch-distributed.yaml", ["U-TORCH-NPROC", "U-FRAMEWORK-LABEL"]),
    ("v2.0-mpi-distributed.yaml", ["U-FRAMEWORK-LABEL"]),
    ("v2.0-deepspeed-distributed.yaml", ["U-FRAMEWORK-LABEL"]),
    ("v2.1-torch-distributed.yaml", ["U-TORCH-NPROC"]),
    ("v2.1-torchtune-llama3.2-1b.yaml", ["U-TORCH-NPROC"]),
    ("v2.2-torch-distributed.yaml", []),
    ("v2.3-torch-distributed.yaml", []),
    ("v2.3-deepspeed-distributed.yaml", []),
]


def _trainjob(spec: dict[str, Any]) -> dict[str, Any]:
    """TrainJob ``t`` on ``torch-distributed`` unless ``spec`` names another runtime."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}  # fmt: skip


def rules(objs: list[dict[str, Any]]) -> list[str]:
    return [f.rule for fs in upgrade_check(objs) for f in fs]


@pytest.mark.parametrize(("file", "expected"), UPSTREAM, ids=[u[0] for u in UPSTREAM])
def test_upstreams_shipped_runtimes_get_exactly_these_findings(
    file: str, expected: list[str]
) -> None:
    assert rules(load(UPSTREAM_V2X / file)) == expected


@pytest.mark.parametrize("file", [u[0] for u in UPSTREAM])
def test_fixed_upstream_runtimes_are_admitted_and_clean(file: str) -> None:
    fixed = upgrade_fix(load(UPSTREAM_V2X / file))
    assert admission_errors(fixed) == []
    assert rules(fixed) == []
    for obj in fixed:
        assert upstream_errors(obj) == []


def test_a_fixed_v2_0_runtime_renders_the_pods_it_meant() -> None:
    (old,) = load(UPSTREAM_V2X / "v2.0-torch-distributed.yaml")
    (fixed,) = upgrade_fix([old])
    job = _trainjob({"trainer": {"numNodes": 2}})
    node = container(pods(job, find_runtime(job, [fixed]) or {})["node"])
    meant = old["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert (node["image"], node["command"]) == (
        meant["containers"][0]["image"],
        meant["containers"][0]["command"],
    )
    assert env_of(node)["PET_NNODES"] == "2"


# A TrainJob as v2.0 and v2.1 wrote it; they differ only in how they override the pods.
_OLD = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: old}
spec:
  runtimeRef: {name: torch-distributed}
  labels: {team: vision}
  annotations: {owner: ana}
  trainer:
    image: python
    command: [python, train.py]
    numNodes: 2
    numProcPerNode: "2"
    env: [{name: EPOCHS, value: "3"}]
    resourcesPerNode: {limits: {cpu: "2"}}
"""
V20 = (
    _OLD
    + """\
  podSpecOverrides:
  - targetJobs: [{name: node}]
    nodeSelector: {disk: ssd}
    tolerations: [{key: gpu, operator: Exists}]
    volumes: [{name: data, emptyDir: {}}]
    containers: [{name: node, volumeMounts: [{name: data, mountPath: /data}]}]
"""
)
V21 = (
    _OLD
    + """\
  podTemplateOverrides:
  - targetJobs: [{name: node}]
    metadata: {labels: {tier: a}}
    spec:
      nodeSelector: {disk: ssd}
      tolerations: [{key: gpu, operator: Exists}]
      volumes: [{name: data, emptyDir: {}}]
      containers: [{name: node, volumeMounts: [{name: data, mountPath: /data}]}]
"""
)
# What both meant, written for v2.3 by hand from reference §6.2/§6.4.
V23 = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: old}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: python
    command: [python, train.py]
    numNodes: 2
    numProcPerNode: 2
    env: [{name: EPOCHS, value: "3"}]
    resourcesPerNode: {limits: {cpu: "2"}}
  runtimePatches:
  - manager: example.com/hand
    trainingRuntimeSpec:
      template:
        metadata: {labels: {team: vision}, annotations: {owner: ana}}
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata: {labels: {tier: a}}
                  spec:
                    nodeSelector: {disk: ssd}
                    tolerations: [{key: gpu, operator: Exists}]
                    volumes: [{name: data, emptyDir: {}}]
                    containers: [{name: node, volumeMounts: [{name: data, mountPath: /data}]}]
"""


def _jobset(job: dict[str, Any]) -> dict[str, Any]:
    from kubetrain.runtime import render

    runtime = find_runtime(job, [])
    return next(o for o in render(job, runtime).objects if o["kind"] == "JobSet")


def _comparable(jobset: dict[str, Any], pod_labels: bool) -> Any:
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    labels = {k: v for k, v in (pod.get("metadata", {}).get("labels") or {}).items() if k == "tier"}
    return (
        {k: v for k, v in jobset["metadata"].get("labels", {}).items() if k == "team"},
        jobset["metadata"].get("annotations", {}).get("owner"),
        labels if pod_labels else None,
        jobset["spec"]["replicatedJobs"][0]["template"]["spec"].get("parallelism"),
        pod["spec"],
    )


@pytest.mark.parametrize(
    ("text", "expected", "pod_labels"),
    [
        (V20, ["U-POD-SPEC-OVERRIDES", "U-SPEC-LABELS", "U-SPEC-LABELS", "U-NPROC-STRING"], False),
        (
            V21,
            ["U-POD-TEMPLATE-OVERRIDES", "U-SPEC-LABELS", "U-SPEC-LABELS", "U-NPROC-STRING"],
            True,
        ),
    ],
    ids=["a v2.0 TrainJob", "a v2.1 TrainJob"],
)
def test_a_fixed_old_trainjob_is_admitted_and_renders_the_pods_it_meant(
    text: str, expected: list[str], pod_labels: bool
) -> None:
    old = yaml.safe_load(text)
    assert rules([old]) == expected
    assert all(
        f.severity == Severity.BREAKS and f.fixable for fs in upgrade_check([old]) for f in fs
    )
    (fixed,) = upgrade_fix([old])
    assert admission_errors([fixed]) == []
    # Same image, command, env, resources, volumes, scheduling, node count and labels.
    assert _comparable(_jobset(fixed), pod_labels) == _comparable(
        _jobset(yaml.safe_load(V23)), pod_labels
    )
    assert upstream_errors(fixed) == []  # last: skips where upstream's CRDs are absent


def test_env_on_the_node_container_moves_to_trainer_env() -> None:
    old = yaml.safe_load(
        V21.replace(
            "containers: [{name: node, volumeMounts",
            "containers: [{name: node, env: [{name: A, value: b}], volumeMounts",
        )
    )
    (fixed,) = upgrade_fix([old])
    assert {"name": "A", "value": "b"} in fixed["spec"]["trainer"]["env"]
    assert admission_errors([fixed]) == []


CASES = [
    ("numProcPerNode auto is removed", {"trainer": {"numProcPerNode": "auto"}}, "U-NPROC-STRING", True),
    ("a storage URI without a scheme", {"initializer": {"dataset": {"storageUri": "bucket/data"}}}, "U-STORAGE-URI", False),
    ("the removed mpi-distributed runtime", {"runtimeRef": {"name": "mpi-distributed"}}, "U-RUNTIME-GONE", False),
    ("reserved OpenMPI env on an MPI runtime", {"runtimeRef": {"name": "deepspeed-distributed"},
     "trainer": {"env": [{"name": "OMPI_MCA_plm_rsh_args", "value": "x"}]}}, "U-MPI-RESERVED-ENV", True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "rule", "fixable"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_trainjob_rules(spec: dict[str, Any], rule: str, fixable: bool) -> None:
    job = _trainjob(spec)
    (findings,) = upgrade_check([job])
    assert [(f.rule, f.fixable) for f in findings] == [(rule, fixable)]


NOT_FLAGGED = [
    ("an integer numProcPerNode", {"trainer": {"numProcPerNode": 4}}),
    ("hf:// and s3:// storage URIs", {"initializer": {"dataset": {"storageUri": "hf://a/b"}, "model": {"storageUri": "s3://m"}}}),
    ("runtimePatches", {"runtimePatches": [{"manager": "example.com/x", "trainingRuntimeSpec": {}}]}),
]  # fmt: skip


@pytest.mark.parametrize("spec", [c[1] for c in NOT_FLAGGED], ids=[c[0] for c in NOT_FLAGGED])
def test_v2_3_trainjob_fields_are_not_flagged(spec: dict[str, Any]) -> None:
    job = _trainjob(spec)
    assert upgrade_check([job]) == [[]]


def test_a_trainer_job_without_a_node_container_gets_it_renamed() -> None:
    (rt,) = load(UPSTREAM_V2X / "v2.3-torch-distributed.yaml")
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["name"] = "trainer"
    assert rules([rt]) == ["U-ANCESTOR-NODE"]
    assert admission_errors(upgrade_fix([rt])) == []


def test_the_v2alpha1_prototype_is_named_and_not_guessed() -> None:
    job = {
        "apiVersion": "kubeflow.org/v2alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "p"},
        "spec": {},
    }
    ((finding,),) = upgrade_check([job])
    assert (finding.rule, finding.severity, finding.fixable) == (
        "U-PROTOTYPE",
        Severity.BREAKS,
        False,
    )


def test_cli_check_fix_and_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "old.yaml"
    path.write_text(V21)
    assert main(["upgrade-check", "-f", str(path)]) == 1  # something breaks
    out = capsys.readouterr().out
    assert f"{path}: TrainJob old: breaks" in out and "[U-POD-TEMPLATE-OVERRIDES]" in out
    assert main(["upgrade-check", "-f", str(path), "--fix"]) == 0
    out, err = capsys.readouterr()
    assert "runtimePatches" in out and "podTemplateOverrides" not in out and "U-SPEC-LABELS" in err
    assert main(["upgrade-check", "-f", str(path), "--fix", "--in-place"]) == 0
    capsys.readouterr()
    assert main(["upgrade-check", "-f", str(path)]) == 0
    assert "no findings" in capsys.readouterr().out


def test_cli_fix_refuses_what_it_cannot_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\n"
                    "spec:\n  runtimeRef: {name: torch-distributed}\n  initializer: {model: {storageUri: m}}\n")  # fmt: skip
    assert main(["upgrade-check", "-f", str(path), "--fix"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "spec.initializer.model.storageUri" in err


def test_a_runtimes_integer_numprocpernode_moves_into_its_trainjobs() -> None:
    (runtime,) = load(UPSTREAM_V2X / "v2.1-torch-distributed.yaml")
    runtime["kind"], runtime["metadata"]["name"] = "TrainingRuntime", "team-torch"
    runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 4  # v2.1: torchrun got 4 processes
    job = _trainjob(
        {
            "runtimeRef": {"name": "team-torch", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2},
        }
    )
    findings = upgrade_check([runtime, job])
    assert [f.rule for f in findings[1]] == ["U-TORCH-NPROC"]
    fixed_runtime, fixed_job = upgrade_fix([runtime, job])
    assert admission_errors([fixed_runtime, fixed_job]) == []
    node = container(pods(fixed_job, find_runtime(fixed_job, [fixed_runtime]) or {})["node"])
    assert (env_of(node)["PET_NPROC_PER_NODE"], env_of(node)["PET_NNODES"]) == ("4", "2")
