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


@pytest.mark.slow
async def test_the_example_trains_across_two_sandboxed_nodes(tmp_path: Path) -> None:
    # In whichever mode this machine gives pods: the example must train in both.
    # The pods as the torch runtime renders them: trainer command and env, PET_* env, and
    # the output volume from the runtime patch.
    tj = trainjob()
    spec = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod_spec = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    mounts = pod_spec["containers"][0]["volumeMounts"]
    # Three epochs instead of ten keep the suite quick; a later env entry wins, as on a node.
    env = [*tj["spec"]["trainer"]["env"], {"name": "EPOCHS", "value": "3"}]
    pods = [
        torch_pod(i, tj["spec"]["trainer"]["command"], pod_spec["volumes"], mounts, env)
        for i in range(2)
    ]
    claims = tmp_path / "claims"
    results, logs = await run_two(tmp_path, pods, claims_dir=claims)
    assert [r.containers for r in results] == [{"node": 0}, {"node": 0}], "\n".join(logs)
    losses = [float(x) for x in re.findall(r"epoch +\d+ +loss ([0-9.]+)", logs[0])]
    assert len(losses) == 3
    assert losses == sorted(losses, reverse=True), losses
    assert losses[-1] < losses[0] / 4, losses
    assert "training on 4 processes" in logs[0]
    assert (claims / "default" / "torch-ddp-output" / "model.pt").stat().st_size > 0
