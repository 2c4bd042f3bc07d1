"""Bad input gets a clear error naming file and field, a non-zero exit, and no output; the
``migrate`` command writes YAML that kubetrain loads back, and its report in text or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from migrate_helpers import UPSTREAM_V1

from kubetrain.api.load import load_objects
from kubetrain.cli.main import main
from kubetrain.migrate import MigrateError, convert

PYTORCH = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: python, command: [python, t.py]}]
"""

REFUSALS = [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "kind",
     "apps/v1/Deployment is not a Training Operator v1 job"),
    ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\n", "kind",
     "is not a Training Operator v1 job"),
    ("apiVersion: kubeflow.org/v1\nkind: MXJob\nmetadata: {name: m}\nspec: {}\n", "kind",
     "unknown kind 'MXJob'"),
    ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec: {runPolicy: {}}\n",
     "spec.pytorchReplicaSpecs", "a PyTorchJob needs its replica specs"),
    (PYTORCH.replace("replicas: 1", "replicas: two"), "spec.pytorchReplicaSpecs.Master.replicas",
     "must be an integer >= 1"),
    (PYTORCH.replace("replicas: 1", "replicas: 2"), "spec.pytorchReplicaSpecs.Master.replicas",
     "Master replicas must be 1"),
    (PYTORCH.replace("name: pytorch", "name: main"), "spec.pytorchReplicaSpecs.Master.template.spec.containers",
     "no container named 'pytorch'"),
    (PYTORCH.replace("Master:", "Chief:"), "spec.pytorchReplicaSpecs.Chief", "unknown replica type 'Chief'"),
    (PYTORCH.replace("{name: p}", "{generateName: p-}"), "metadata.name", "needs a fixed name"),
    (PYTORCH.replace("{name: p}", "{name: P_1}"), "metadata.name", "not a DNS-1035 label"),
    ("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: m}\nspec:\n  mpiReplicaSpecs:\n"
     "    Launcher: {template: {spec: {containers: [{name: l, image: x}]}}}\n",
     "spec.mpiReplicaSpecs.Worker.replicas", "a launcher-only MPIJob cannot be expressed"),
    (PYTORCH.replace("command: [python, t.py]", "command: true"),
     "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command", "must be of type array, not boolean"),
    (PYTORCH.replace("spec:\n  pytorchReplicaSpecs", "spec:\n  runPolicy: {backoffLimit: many}\n  pytorchReplicaSpecs"),
     "spec.runPolicy.backoffLimit", 'Invalid value: "many": must be of type integer, not string'),
]  # fmt: skip
IDS = [
    "a Deployment is not a v1 job", "a TrainJob is not a v1 job", "an unknown kubeflow.org kind",
    "a v1 job without replica specs", "replicas that are not a number", "two Masters",
    "no container with the framework's name", "a replica type the kind lacks", "no fixed name",
    "a name that is not a DNS label", "an MPIJob without workers",
    "a pod template that breaks the PodTemplateSpec schema", "a runPolicy field of the wrong type",
]  # fmt: skip


@pytest.mark.parametrize(("text", "path", "reason"), REFUSALS, ids=IDS)
def test_bad_input_is_refused_with_the_field_and_the_reason(
    text: str, path: str, reason: str
) -> None:
    with pytest.raises(MigrateError) as err:
        convert(yaml.safe_load(text), source="job.yaml")
    assert path in [e.path for e in err.value.errors]
    assert reason in str(err.value)
    assert str(err.value).startswith("job.yaml")


def test_the_cli_refuses_a_folder_with_one_bad_file_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(PYTORCH)
    (tmp_path / "b.yaml").write_text((UPSTREAM_V1 / "mpijob-pi-intel.yaml").read_text())
    assert main(["migrate", "-f", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        f"{tmp_path / 'b.yaml'}: MPIJob pi: spec.mpiImplementation: Intel cannot be converted"
        in err
    )
    assert "Traceback" not in err


def test_the_cli_refuses_unparsable_yaml_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    assert main(["migrate", "-f", str(tmp_path / "bad.yaml")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "bad.yaml" in err and "Traceback" not in err


def test_the_cli_writes_yaml_kubetrain_loads_and_a_text_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["migrate", "-f", str(UPSTREAM_V1 / "tfjob-dist-mnist.yaml")]) == 0
    out, err = capsys.readouterr()
    objs = load_objects(out, source="stdout")
    assert [o["kind"] for o in objs] == ["TrainingRuntime", "TrainJob"]
    assert (
        "TFJob dist-mnist-for-e2e-test -> TrainJob dist-mnist-for-e2e-test on TrainingRuntime"
        in err
    )
    assert "spec.tfReplicaSpecs.Chief.template.spec.containers[0].env" in err


def test_the_cli_report_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "migrate",
        "-f",
        str(UPSTREAM_V1 / "pytorch-simple.yaml"),
        "--report",
        "json",
        "--no-env-shim",
    ]
    assert main(args) == 0
    out, err = capsys.readouterr()
    (report,) = json.loads(err)
    assert report["source"] == {"kind": "PyTorchJob", "name": "pytorch-simple"}
    assert report["runtime"] == {
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
        "generated": False,
    }
    items: list[dict[str, Any]] = report["items"]
    assert {i["category"] for i in items} == {"manual", "dropped"}
    assert "MASTER_ADDR" not in out


def test_stdin_works(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(PYTORCH))
    assert main(["migrate", "-f", "-"]) == 0
    assert "kind: TrainJob" in capsys.readouterr().out


def test_apply_to_a_cluster_needs_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    job = tmp_path / "p.yaml"
    job.write_text(PYTORCH)
    assert main(["apply", "-f", str(job), "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert (
        "PyTorchJob/p: Training Operator v1 kinds are sent to a cluster only with --convert" in err
    )


def test_a_name_too_long_for_jobsets_pod_names_is_reported() -> None:
    c = convert(yaml.safe_load(PYTORCH.replace("{name: p}", "{name: " + "a" * 50 + "}")))
    (item,) = [i for i in c.report if i.path == "metadata.name"]
    assert "exceed 63 characters" in item.why and item.action == "give the TrainJob a shorter name"
