"""Real upstream v1 manifests (tests/migrate/upstream/v1, each file names its origin) convert:
to the runtime the mapping rules pick, with exactly the report items that name what changed, and
into objects that upstream's v2.3 CRDs and kubetrain's admission both accept."""

from __future__ import annotations

import os
from typing import Any

import pytest
from migrate_helpers import HERE, UPSTREAM_V1, load, upstream_errors

from kubetrain.api.dump import dump_yaml
from kubetrain.migrate import Category, MigrateError, convert
from kubetrain.migrate.admit import admission_errors

A, D, M = Category.APPROXIMATED, Category.DROPPED, Category.MANUAL
PT = "spec.pytorchReplicaSpecs"
TF = "spec.tfReplicaSpecs"
XGB = "spec.xgbReplicaSpecs"
JAX = "spec.jaxReplicaSpecs.Worker.template.spec.containers[0]"
MPI = "spec.mpiReplicaSpecs"
C0 = "template.spec.containers[0]"
ELASTIC = [(A, "spec.elasticPolicy.rdzvBackend"), (D, "spec.elasticPolicy.maxReplicas"),
           (D, "spec.elasticPolicy.maxRestarts"), (D, "spec.elasticPolicy.minReplicas")]  # fmt: skip

# file, runtime, generated?, trainer.numNodes, report items (category, v1 path)
EXPECTED: list[tuple[str, str, bool, int, list[tuple[Category, str]]]] = [
    ("pytorch-simple.yaml", "torch-distributed", False, 2,
     [(A, f"{PT}.Master.{C0}.env"), (D, f"{PT}.Master.{C0}.imagePullPolicy")]),
    ("pytorch-sendrecv.yaml", "torch-distributed", False, 4, [(A, f"{PT}.Master.{C0}.env")]),
    ("pytorch-mnist-gloo.yaml", "torch-distributed", False, 2, [(A, f"{PT}.Master.{C0}.env")]),
    ("pytorch-cpu-demo.yaml", "torch-distributed", False, 2, []),
    ("pytorch-deepspeed-demo.yaml", "torch-distributed", False, 2, []),
    ("pytorch-elastic-echo.yaml", "torch-distributed", False, 2,
     [*ELASTIC, (A, f"{PT}.Worker.{C0}.env"), (D, f"{PT}.Worker.{C0}.imagePullPolicy")]),
    ("pytorch-elastic-imagenet.yaml", "torch-distributed", False, 2,
     [*ELASTIC, (D, "spec.elasticPolicy.metrics"), (D, f"{PT}.Worker.{C0}.imagePullPolicy")]),
    ("tfjob-simple.yaml", "tfjob-simple-runtime", True, 2,
     [(A, "spec.successPolicy"), (A, f"{TF}.Worker.{C0}.env")]),
    ("tfjob-dist-mnist.yaml", "dist-mnist-for-e2e-test-runtime", True, 2,
     [(A, f"{TF}.Chief.{C0}.env"), (A, f"{TF}.PS.{C0}.env"), (A, f"{TF}.Worker.{C0}.env")]),
    ("tfjob-multi-worker.yaml", "multi-worker-runtime", True, 2,
     [(A, "spec.successPolicy"), (A, f"{TF}.Worker.{C0}.env"), (D, "spec.runPolicy.cleanPodPolicy")]),
    ("tfjob-mnist-with-summaries.yaml", "mnist-runtime", True, 1, [(D, "spec.runPolicy.cleanPodPolicy")]),
    ("xgboostjob.yaml", "xgboost-dist-iris-test-train-runtime", True, 3,
     [(A, "spec"), (A, f"{XGB}.Master.{C0}.env"), (A, f"{XGB}.Worker.restartPolicy"),
      (A, f"{XGB}.Worker.{C0}.args")]),
    ("xgboost-rabit-test.yaml", "xgboost-dist-test-runtime", True, 3,
     [(A, "spec"), (A, f"{XGB}.Master.{C0}.env")]),
    ("xgboost-lightgbm.yaml", "lightgbm-dist-train-test-runtime", True, 3,
     [(A, "spec"), (A, f"{XGB}.Master.{C0}.env"), (A, f"{XGB}.Worker.restartPolicy")]),
    ("jaxjob-simple.yaml", "jax-distributed", False, 2, [(A, f"{JAX}.env"), (D, f"{JAX}.imagePullPolicy")]),
    ("jaxjob-spmd-mnist.yaml", "jax-distributed", False, 2, [(A, f"{JAX}.env"), (D, f"{JAX}.imagePullPolicy")]),
    ("paddle-simple-cpu.yaml", "paddle-simple-cpu-runtime", True, 2,
     [(A, f"spec.paddleReplicaSpecs.Worker.{C0}.env")]),
    ("paddle-simple-gpu.yaml", "paddle-simple-gpu-runtime", True, 2,
     [(A, f"spec.paddleReplicaSpecs.Worker.{C0}.env")]),
    ("mpijob-pi.yaml", "pi-runtime", True, 2,
     [(A, "spec.runPolicy.ttlSecondsAfterFinished"), (M, f"{MPI}.Launcher.{C0}.env")]),
    ("mpijob-horovod-tensorflow-mnist.yaml", "tensorflow-mnist-runtime", True, 2,
     [(A, f"{MPI}.Worker.{C0}.command"), (M, f"{MPI}.Launcher.{C0}.env")]),
    ("mpijob-tensorflow-benchmarks.yaml", "tensorflow-benchmarks-runtime", True, 2,
     [(A, f"{MPI}.Worker.{C0}.command"), (M, f"{MPI}.Launcher.{C0}.env")]),
    ("mpijob-v1-tensorflow-mnist.yaml", "tensorflow-mnist-runtime", True, 2,
     [(A, f"{MPI}.Worker.{C0}.command"), (M, MPI), (M, f"{MPI}.Launcher.{C0}.env")]),
]  # fmt: skip


GOLDEN = HERE / "golden"


def _one(file: str) -> dict[str, Any]:
    (doc,) = load(UPSTREAM_V1 / file)
    return doc


def test_every_collected_upstream_example_is_covered() -> None:
    covered = {e[0] for e in EXPECTED} | {"mpijob-pi-intel.yaml", "mpijob-pi-mpich.yaml"}
    assert {p.name for p in UPSTREAM_V1.glob("*.yaml")} == covered


def test_every_collected_file_names_its_upstream_origin() -> None:
    for p in UPSTREAM_V1.parent.glob("*/*.yaml"):
        assert p.read_text().startswith("# source: github.com/kubeflow/"), p.name


@pytest.mark.parametrize(
    ("file", "runtime", "generated", "num_nodes", "report"), EXPECTED, ids=[e[0] for e in EXPECTED]
)
def test_the_upstream_example_converts_with_exactly_these_report_items(
    file: str, runtime: str, generated: bool, num_nodes: int, report: list[tuple[Category, str]]
) -> None:
    c = convert(_one(file))
    assert (c.runtime_name, c.generated_runtime) == (runtime, generated)
    assert c.trainjob["spec"]["trainer"]["numNodes"] == num_nodes
    assert sorted((i.category, i.path) for i in c.report) == sorted(report)
    assert c.trainjob["spec"]["runtimeRef"]["kind"] == (
        "TrainingRuntime" if generated else "ClusterTrainingRuntime"
    )
    assert admission_errors(c.objects) == []
    for item in c.report:  # every item says why and what to do
        assert item.why and item.action


@pytest.mark.parametrize("file", [e[0] for e in EXPECTED])
def test_the_output_is_valid_under_upstreams_v2_3_crds(file: str) -> None:
    for obj in convert(_one(file)).objects:
        assert upstream_errors(obj) == []


@pytest.mark.parametrize("file", [e[0] for e in EXPECTED])
def test_no_runtime_reserved_env_reaches_trainer_env(file: str) -> None:
    trainer = convert(_one(file)).trainjob["spec"]["trainer"]
    names = [e["name"] for e in trainer.get("env", [])]
    assert not [n for n in names if n.startswith(("PET_NNODES", "PET_NPROC", "PET_NODE_RANK",
                                                   "PET_MASTER", "DMLC_", "OMPI_MCA_"))]  # fmt: skip


@pytest.mark.parametrize(
    ("file", "reason"),
    [
        ("mpijob-pi-intel.yaml", "Intel cannot be converted"),
        ("mpijob-pi-mpich.yaml", "MPICH cannot be converted"),
    ],
)
def test_intel_and_mpich_mpijobs_are_refused(file: str, reason: str) -> None:
    with pytest.raises(MigrateError) as err:
        convert(_one(file))
    assert [e.path for e in err.value.errors] == ["spec.mpiImplementation"]
    assert reason in str(err.value)


@pytest.mark.parametrize("file", [e[0] for e in EXPECTED])
def test_the_converted_objects_are_exactly_the_reviewed_golden_yaml(file: str) -> None:
    """golden/<file> holds the output, reviewed by hand against reference §5. To regenerate after
    a deliberate change: KUBETRAIN_UPDATE_GOLDEN=1, then review the diff line by line."""
    got = dump_yaml(convert(_one(file)).objects)
    golden = GOLDEN / file
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN") == "1":
        golden.write_text(got)
    assert got == golden.read_text()
