"""examples/torch-ddp: the TrainJob stays upstream-valid, carries train.py verbatim, and trains."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_sandbox_torch import run_two, torch_pod

from upstream_data import require, unknown_fields

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch-ddp"


def trainjob() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    return data


def embedded_script(command: list[str]) -> str:
    match = re.search(r"<<'TRAIN_PY'\n(.*?)\nTRAIN_PY\n", command[-1], re.S)
    assert match, "the command must write the script with a quoted heredoc"
    return match.group(1) + "\n"


def test_the_trainjob_carries_train_py_verbatim() -> None:
    assert (
        embedded_script(trainjob()["spec"]["trainer"]["command"])
        == (EXAMPLE / "train.py").read_text()
    )


def test_the_script_survives_kubernetes_dollar_expansion() -> None:
    # The kubelet rewrites $(NAME) and $$ in commands; the script must contain neither.
    script = (EXAMPLE / "train.py").read_text()
    assert "$(" not in script and "$$" not in script


def test_the_trainjob_is_valid_for_upstream_trainer() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    crd = yaml.safe_load(require("upstream-crds/trainer.kubeflow.org_trainjobs.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    tj = trainjob()
    jsonschema.validate(tj, schema)
    # Structural schemas prune unknown fields silently; the example must not rely on any.
    assert unknown_fields(tj, schema) == []
    assert tj["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    assert (tj["spec"]["trainer"]["numNodes"], tj["spec"]["trainer"]["numProcPerNode"]) == (2, 2)


# Stands in for train.py: training the example is `kubetrain run`'s end-to-end test
# (tests/cli/test_cmd_run.py); here only what the sandboxes give it, without six torch imports.
STAND_IN = """\
import os, socket
from pathlib import Path
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(f"rank {rank} of {world} on {socket.gethostname()} from {__file__}", flush=True)
if rank == 0:
    out = Path(os.environ["OUTPUT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.pt").write_text("stand-in")
"""


@pytest.mark.slow
async def test_the_example_runs_across_two_sandboxed_nodes_and_saves_to_its_volume(
    tmp_path: Path,
) -> None:
    # In whichever mode this machine gives pods. The pods as the torch runtime renders them:
    # the trainer's command (its heredoc into each pod's own /tmp, then torchrun) and env,
    # PET_* env, and the output volume from the runtime patch; only the script differs.
    tj = trainjob()
    spec = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod_spec = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    mounts = pod_spec["containers"][0]["volumeMounts"]
    command = tj["spec"]["trainer"]["command"]
    train_py = embedded_script(command)
    command = [*command[:-1], command[-1].replace(train_py, STAND_IN)]
    assert embedded_script(command) == STAND_IN
    pods = [
        torch_pod(i, command, pod_spec["volumes"], mounts, tj["spec"]["trainer"]["env"])
        for i in range(2)
    ]
    claims = tmp_path / "claims"
    results, logs = await run_two(tmp_path, pods, claims_dir=claims)
    assert [r.containers for r in results] == [{"node": 0}, {"node": 0}], "\n".join(logs)
    # torchrun's rendezvous across the two sandboxes made one world of 4 processes.
    ranks = re.findall(r"rank (\d) of (\d) on (\S+) from /tmp/train.py", "\n".join(logs))
    assert sorted(ranks) == [
        ("0", "4", "tj-node-0-0"), ("1", "4", "tj-node-0-0"),
        ("2", "4", "tj-node-0-1"), ("3", "4", "tj-node-0-1"),
    ]  # fmt: skip
    assert (claims / "default" / "torch-ddp-output" / "model.pt").read_text() == "stand-in"
