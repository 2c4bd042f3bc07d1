"""Render level: every framework example is an upstream TrainJob whose rendered pods carry
what its framework needs, and the local engine's refusal speaks before anything hangs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from frameworks_plane import default_runtime, plan_objects

from kubetrain.local.frameworks import REFUSAL_REASON, local_refusal
from kubetrain.local.frameworks.refusal import __all__ as refusal_all
from kubetrain.runtime import validate_trainjob
from upstream_data import require

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUNNABLE = ["mpi", "jax", "xgboost", "mlx", "deepspeed"]


def load(name: str, file: str = "trainjob.yaml") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name / file).read_text())
    return data


def jobset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "JobSet")


def container(js: dict[str, Any], rjob: str) -> dict[str, Any]:
    r = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == rjob)
    found: dict[str, Any] = r["template"]["spec"]["template"]["spec"]["containers"][0]
    return found


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_example_script_in_the_trainjob_is_train_py_verbatim(name: str) -> None:
    script = (EXAMPLES / name / "train.py").read_text()
    assert load(name)["spec"]["trainer"]["command"][-1] == script
    # Kubernetes expands $(NAME) in commands: the script must never contain the pattern.
    assert "$(" not in script


@pytest.mark.parametrize("name", [*RUNNABLE, "flux"])
def test_the_example_is_valid_under_upstreams_trainjob_schema(name: str) -> None:
    import jsonschema  # type: ignore[import-untyped]  # no stubs in the venv

    crd = yaml.safe_load(require("upstream-crds/trainer.kubeflow.org_trainjobs.yaml").read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    jsonschema.validate(load(name), schema["schema"]["openAPIV3Schema"])
    runtime = (
        load("flux", "runtime.yaml") if name == "flux"
        else default_runtime(load(name)["spec"]["runtimeRef"]["name"])
    )  # fmt: skip
    assert validate_trainjob(load(name), runtime).errors == []


def test_mpi_renders_hostfile_keys_and_openmpi_env() -> None:
    objects = plan_objects(load("mpi"))
    hostfile = next(o for o in objects if o["metadata"]["name"] == "mpi-mpi-hostfile")
    assert hostfile["data"]["hostfile"] == (
        "mpi-node-0-0.mpi slots=2\nmpi-node-0-1.mpi slots=2\nmpi-launcher-0-0.mpi slots=2\n"
    )
    secret = next(o for o in objects if o["kind"] == "Secret" and "ssh" in o["metadata"]["name"])
    assert secret["type"] == "kubernetes.io/ssh-auth"
    js = jobset(objects)
    launcher, node = container(js, "launcher"), container(js, "node")
    assert env(launcher)["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert launcher["command"][:2] == ["mpirun", "python"]
    assert node["command"] == ["/usr/sbin/sshd"]
    assert node["args"] == ["-De", "-f", "/home/mpiuser/.sshd_config"]
    for c in (launcher, node):
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        assert mounts["mpi-ssh-auth"] == "/home/mpiuser/.ssh"


def test_jax_and_xgboost_render_their_coordinator_env() -> None:
    jax = env(container(jobset(plan_objects(load("jax"))), "node"))
    assert jax["JAX_COORDINATOR_ADDRESS"] == "jax-node-0-0.jax:29500"
    assert jax["JAX_NUM_PROCESSES"] == "2"
    xgb = env(container(jobset(plan_objects(load("xgboost"))), "node"))
    assert xgb["DMLC_TRACKER_URI"] == "xgboost-node-0-0.xgboost"
    assert (xgb["DMLC_TRACKER_PORT"], xgb["DMLC_NUM_WORKER"]) == ("29500", "2")


def test_every_runnable_example_passes_the_local_refusal_check() -> None:
    for name in RUNNABLE:
        js = jobset(plan_objects(load(name)))
        for r in js["spec"]["replicatedJobs"]:
            assert local_refusal(r["template"]["spec"]["template"]) is None, name


def test_flux_pods_are_refused_on_the_local_engine_with_a_reason() -> None:
    js = jobset(plan_objects(load("flux"), load("flux", "runtime.yaml")))
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    message = local_refusal(template)
    assert message is not None and message.startswith("the Flux runtime cannot run")
    assert "flux-view-ubuntu" in message
    assert REFUSAL_REASON == "UnsupportedOnLocalEngine" and "local_refusal" in refusal_all


def test_mpi_pods_are_refused_without_bwrap_and_without_sshd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    js = jobset(plan_objects(load("mpi")))
    node = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == "node")
    template = node["template"]["spec"]["template"]
    plain = local_refusal(template, sandbox_mode="plain", mode_reason="bwrap: no user namespaces")
    assert plain is not None and "bwrap: no user namespaces" in plain
    monkeypatch.setattr("kubetrain.local.frameworks.refusal.shutil.which", lambda _: None)
    missing = local_refusal(template)
    assert missing is not None and "apt-get install openssh-server" in missing
