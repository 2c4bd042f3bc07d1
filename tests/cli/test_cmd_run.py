"""``kubetrain run`` end to end on the local daemon: real pods, real processes, real exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from daemons import module_daemon
from kubetrain.testing import make_runtime

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "torch-ddp" / "trainjob.yaml"

pytestmark = pytest.mark.timeout(120)

# Runs the CLI as users do, in its own process; registers the commands this suite covers in case
# the entry point does not list them yet.
_SHIM = """
import sys
from kubetrain.cli import main as m
for name in ("run", "get", "delete", "resume", "logs"):
    m.COMMANDS.setdefault(name, ("cmd_" + name, name))
sys.exit(m.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_daemon(tmp_path_factory)


def kubetrain(home: Path, *argv: str, **popen: object) -> subprocess.Popen[str]:
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-c", _SHIM, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[call-overload]
    )


def done(home: Path, *argv: str, timeout: float = 90) -> tuple[int, str, str]:
    proc = kubetrain(home, *argv)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def runtime_yaml(name: str, *, once: bool = False) -> str:
    """A namespaced runtime that declares no ports: these tests need no rendezvous, and pods of
    runtimes declaring a port (torch's 29500) queue machine-wide behind any other job holding it.
    ``once``: its Job never retries and its pods never restart."""
    runtime = (
        make_runtime(name, kind="TrainingRuntime")
        .framework("shell")
        .num_nodes(1)
        .job("node", ancestor="trainer", image="python",
             command=["bash", "-c", "echo the runtime's command"])
        .obj()
    )  # fmt: skip
    if once:
        job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        job["backoffLimit"] = 0
        job["template"]["spec"]["restartPolicy"] = "Never"
    return yaml.safe_dump(runtime) + "---\n"


RUNTIME = runtime_yaml("shell")


def job_file(tmp_path: Path, name: str, script: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        RUNTIME + "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n  runtimeRef: {name: shell, kind: TrainingRuntime}\n"
        f"  trainer:\n    numNodes: 2\n    command: [bash, -c, {script!r}]\n"
        # The node's index, as JobSet's pods carry it (the downward API, resolved locally too).
        "    env:\n    - name: INDEX\n      valueFrom:\n        fieldRef:\n          fieldPath: "
        "\"metadata.annotations['batch.kubernetes.io/job-completion-index']\"\n"
    )
    return path


def test_a_job_that_completes_streams_rank_zero_and_exits_0(home: Path, tmp_path: Path) -> None:
    path = job_file(tmp_path, "hello", 'echo "hello from rank $INDEX"')
    code, out, err = done(home, "run", "-f", str(path))
    assert code == 0, err
    assert out == "hello from rank 0\n"
    assert "trainjob.trainer.kubeflow.org/hello created" in err
    assert "trainingruntime.trainer.kubeflow.org/shell " in err
    assert "trainjob hello Complete" in err
    # Running a finished job again shows that run and says how to start a new one.
    code, out, err = done(home, "run", "-f", str(path))
    assert (code, out) == (0, "hello from rank 0\n")
    assert "had already finished (Complete)" in err
    assert done(home, "delete", "hello")[0] == 0


def test_a_job_that_fails_exits_1_with_the_reason(home: Path, tmp_path: Path) -> None:
    path = job_file(tmp_path, "boom", "echo about to fail; exit 3")
    code, out, err = done(home, "run", "-f", str(path))
    assert code == 1
    # The Job's retries run the pod again before the JobSet gives up: each run's output shows.
    assert set(out.splitlines()) == {"about to fail"}
    assert "trainjob boom Failed:" in err
    assert "exited 3" in err
    assert "Traceback" not in err
    assert done(home, "delete", "boom")[0] == 0


def test_ctrl_c_suspends_the_job_and_says_how_to_resume(home: Path, tmp_path: Path) -> None:
    path = job_file(tmp_path, "sleeper", "echo started; sleep 300")
    proc = kubetrain(home, "run", "-f", str(path))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "trainjob sleeper is suspended" in err
    assert "kubetrain resume sleeper" in err
    assert "kubetrain delete sleeper" in err
    _, out, _ = done(home, "get", "trainjob", "sleeper")
    assert out.splitlines()[1].split()[:2] == ["sleeper", "Suspended"]
    assert "sleeper" not in done(home, "get", "pods", "-o", "name")[1]
    assert done(home, "delete", "sleeper")[0] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)  # torch's port 29500 is queued machine-wide behind other jobs
def test_the_torch_ddp_example_trains_to_completion(home: Path) -> None:
    start = time.monotonic()
    code, out, err = done(home, "run", "-f", str(EXAMPLE), timeout=280)
    assert code == 0, err
    losses = [float(line.split()[-1]) for line in out.splitlines() if line.startswith("epoch")]
    assert len(losses) == 10 and losses[-1] < losses[0] / 5
    assert "training on 4 processes" in out
    # Rank 0 saved the model to the PVC the runtime patch mounts (a directory of the home here).
    assert "model saved to /workspace/output/model.pt" in out
    assert (home / "volumes" / "default" / "torch-ddp-output" / "model.pt").stat().st_size > 0
    assert time.monotonic() - start < 280
    assert done(home, "delete", "torch-ddp")[0] == 0


def test_a_job_over_its_memory_limit_fails_oomkilled_and_describe_says_so(
    home: Path, tmp_path: Path
) -> None:
    from kubetrain.local.sandbox import cgroup_probe

    if cgroup_probe().tree is None:
        pytest.skip(f"limits are not enforced here: {cgroup_probe().reason}")
    # One node, no retries, 64Mi: touching 512 MB gets the container OOM-killed. With
    # restartPolicy Never the failed pod stays (OnFailure pods of a failed Job are deleted by
    # the Job controller, here as on a cluster) and describe shows its end.
    text = (
        runtime_yaml("shell-once", once=True)
        + "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: hog}\n"
        "spec:\n  runtimeRef: {name: shell-once, kind: TrainingRuntime}\n"
        "  trainer:\n    numNodes: 1\n"
        "    resourcesPerNode: {limits: {memory: 64Mi}}\n"
        "    command: [python, -c, \"x = ' ' * (512 * 1024 * 1024)\"]\n"
    )
    path = tmp_path / "hog.yaml"
    path.write_text(text)
    code, _, err = done(home, "run", "-f", str(path))
    assert code == 1, err
    assert "trainjob hog Failed" in err
    assert "exited 137 (OOMKilled)" in err
    code, out, err = done(home, "describe", "trainjob", "hog")
    assert code == 0, err
    step = next(
        (line.split() for line in out.splitlines() if line.strip().startswith("node-0")), out
    )
    assert step[-2:] == ["137", "OOMKilled"], out
    assert done(home, "delete", "hog")[0] == 0
