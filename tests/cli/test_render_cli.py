"""``kubetrain render|validate|runtimes`` through a real subprocess."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubetrain.runtime.defaults import default_runtimes

REPO = Path(__file__).resolve().parents[2]
JOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj1, namespace: u}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {numNodes: 2, resourcesPerNode: {limits: {nvidia.com/gpu: 2}}}
"""


def kubetrain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def test_render_prints_objects_then_the_trainjob(job_file: Path) -> None:
    out = kubetrain("render", "-f", str(job_file), "--feature-gates", "TrainJobStatus=false")
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", "tj1-runtime-snapshot"),
        ("JobSet", "tj1"),
        ("TrainJob", "tj1"),
    ]
    assert (
        docs[1]["metadata"]["ownerReferences"][0]["uid"] == "00000000-0000-0000-0000-000000000000"
    )


def test_render_default_gates_add_the_status_server_plumbing(job_file: Path) -> None:
    out = kubetrain("render", "-f", str(job_file), "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [i["metadata"]["name"] for i in doc["items"]] == [
        "tj1-runtime-snapshot",
        "tj1-tls-config",
        "tj1",
        "tj1",
    ]


def test_render_is_byte_for_byte_reproducible(job_file: Path) -> None:
    runs = {kubetrain("render", "-f", str(job_file)).stdout for _ in range(2)}
    assert len(runs) == 1


def test_render_takes_folders_and_runtimes_from_files(tmp_path: Path) -> None:
    (tmp_path / "a-job.yaml").write_text(JOB.replace("torch-distributed", "mine"))
    (tmp_path / "b-runtime.yaml").write_text(
        yaml.safe_dump(
            next(r for r in default_runtimes() if r["metadata"]["name"] == "torch-distributed")
        ).replace("name: torch-distributed", "name: mine")
    )
    out = kubetrain("render", "-f", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "mine" in out.stdout


def test_rejection_prints_nothing_on_stdout_and_one_line_per_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        JOB.replace("trainer: {", "trainer: {env: [{name: PET_NNODES, value: '1'}], ")
        + "  initializer: {dataset: {storageUri: hf://x}}\n"
    )
    out = kubetrain("render", "-f", str(path))
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_NNODES]",
        "spec.runtimeRef: must have dataset-initializer job when trainJob is configured with input datasetConfig",
    ]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("a: [1, 2\n", "", id="broken YAML"),
        pytest.param(JOB.replace("numNodes", "numNode"), "numNode", id="unknown field"),
    ],
)
def test_bad_input_is_one_error_line_not_a_traceback(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    out = kubetrain("render", "-f", str(path))
    assert out.returncode == 1
    assert out.stdout == ""
    assert "Traceback" not in out.stderr and out.stderr.strip()
    assert needle in out.stderr


def test_unknown_feature_gate_is_an_error(job_file: Path) -> None:
    out = kubetrain("render", "-f", str(job_file), "--feature-gates", "Nope=true")
    assert out.returncode == 1 and "unrecognized feature gate: Nope" in out.stderr


def test_validate_is_silent_when_valid(job_file: Path) -> None:
    out = kubetrain("validate", "-f", str(job_file))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_runtimes_table_and_one_runtime_as_yaml() -> None:
    table = kubetrain("runtimes")
    assert table.returncode == 0
    assert "torch-distributed" in table.stdout and "deepspeed-distributed" in table.stdout
    one = kubetrain("runtimes", "torch-distributed", "-o", "yaml")
    assert yaml.safe_load(one.stdout)["metadata"]["name"] == "torch-distributed"
    missing = kubetrain("runtimes", "nope")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_help_is_fast() -> None:
    # The child's CPU seconds, not wall time: what --help costs, whatever the machine's load.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "--help"], capture_output=True, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert out.returncode == 0
    assert cpu < 0.5, f"kubetrain --help took {cpu:.2f} s of CPU"


def test_import_kubetrain_and_runtime_stay_light() -> None:
    code = (
        "import sys, kubetrain, kubetrain.runtime, kubetrain.testing\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'kubernetes', 'lightkube', 'aiohttp')]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_several_trainjobs_name_their_error_lines(tmp_path: Path) -> None:
    bad = JOB.replace("tj1", "tj2").replace(
        "trainer: {", "trainer: {env: [{name: PET_NNODES, value: '1'}], "
    )
    path = tmp_path / "two.yaml"
    path.write_text(JOB + "---\n" + bad)
    out = kubetrain("render", "-f", str(path))
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.splitlines() == [
        "TrainJob tj2: spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_NNODES]"
    ]
