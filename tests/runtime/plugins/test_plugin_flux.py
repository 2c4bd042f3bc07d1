"""Flux plugin (trainer v2.3.0 pkg/runtime/framework/plugins/flux/flux.go): command wrap, init container, volumes, ConfigMap, Secret, checks."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from plugin_runtimes import flux_runtime
from runtime_helpers import error_pairs

from kubetrain.api.errors import FieldError
from kubetrain.runtime import validate_trainjob
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import new_runtime_info
from kubetrain.runtime.flux_assets import flux_curve_cert
from kubetrain.runtime.framework import RenderError, ValidationContext
from kubetrain.runtime.plugins.flux import Flux
from kubetrain.runtime.render import render
from kubetrain.testing import make_runtime, make_trainjob

GATES = FeatureGates.upstream_defaults()
ENV = Environment()


def trainjob(**trainer: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "lammps", "namespace": "hpc", "uid": "4f1c"},
        "spec": {"runtimeRef": {"name": "flux-distributed"}, "trainer": trainer},
    }


def rendered(job: dict[str, Any], runtime: dict[str, Any]) -> dict[tuple[str, str], Any]:
    plan = render(job, runtime, gates=GATES, environment=ENV)
    return {(o["kind"], o["metadata"]["name"]): o for o in plan.objects}


def node_pod(objs: dict[tuple[str, str], Any]) -> dict[str, Any]:
    pod: dict[str, Any] = objs[("JobSet", "lammps")]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]
    return pod


@pytest.mark.parametrize(
    ("trainer", "runtime_node", "wrapped"),
    [
        ({"numNodes": 2, "args": ["-in", "in.reaxff"]}, {}, "lmp -in in.reaxff"),
        ({"numNodes": 2, "command": ["python", "train.py"]}, {}, "python train.py"),
        ({"numNodes": 2}, {"args": ["-v"]}, "lmp"),
    ],
    ids=[
        "the runtime command with the TrainJob's args",
        "the TrainJob's command replaces the runtime's",
        "runtime args are not part of the wrapped command",
    ],
)
def test_the_trainer_command_is_wrapped(
    trainer: dict[str, Any], runtime_node: dict[str, Any], wrapped: str
) -> None:
    container = node_pod(rendered(trainjob(**trainer), flux_runtime(**runtime_node)))["containers"][
        0
    ]
    assert container["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", wrapped]
    # Args are cleared on the TrainJob side, so only a runtime's own args survive (as upstream).
    assert container.get("args") == runtime_node.get("args")


def test_volumes_mounts_and_installer() -> None:
    pod = node_pod(rendered(trainjob(numNodes=2), flux_runtime()))
    assert pod["volumes"] == [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {
            "name": "lammps-flux-entrypoint",
            "configMap": {"name": "lammps-flux-entrypoint", "defaultMode": 0o755},
        },
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": "lammps-flux-curve", "defaultMode": 0o400}},
    ]
    assert pod["initContainers"] == [
        {
            "name": "flux-installer",
            "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
            "command": ["/bin/bash", "/etc/flux-config/init.sh"],
            "volumeMounts": [
                {"name": "flux-install", "mountPath": "/mnt/flux"},
                {
                    "name": "lammps-flux-entrypoint",
                    "readOnly": True,
                    "mountPath": "/etc/flux-config",
                },
            ],
        }
    ]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "flux-install", "mountPath": "/mnt/flux"},
        {"name": "spack-install", "mountPath": "/opt/software"},
        {"name": "lammps-flux-entrypoint", "readOnly": True, "mountPath": "/etc/flux-config"},
        {"name": "flux-curve", "readOnly": True, "mountPath": "/curve"},
        {"name": "shared-memory", "readOnly": True, "mountPath": "/dev/shm"},
    ]


def test_the_view_image_comes_from_env_with_the_trainjob_winning() -> None:
    runtime = flux_runtime(env=[{"name": "FLUX_VIEW_IMAGE", "value": "runtime/view"}])
    pod = node_pod(rendered(trainjob(numNodes=1), runtime))
    assert pod["initContainers"][0]["image"] == "runtime/view"
    job = trainjob(numNodes=1, env=[{"name": "FLUX_VIEW_IMAGE", "value": "job/view"}])
    assert node_pod(rendered(job, runtime))["initContainers"][0]["image"] == "job/view"
    custom = Environment(flux_view_image="mirror/view:1")
    plan = render(trainjob(numNodes=1), flux_runtime(), gates=GATES, environment=custom)
    jobset = next(o for o in plan.objects if o["kind"] == "JobSet")
    assert (
        jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "initContainers"
        ][0]["image"]
        == "mirror/view:1"
    )


def test_configmap_and_curve_secret() -> None:
    objs = rendered(
        trainjob(numNodes=3, numProcPerNode=4, resourcesPerNode={"limits": {"nvidia.com/gpu": 2}}),
        flux_runtime(),
    )
    cm = objs[("ConfigMap", "lammps-flux-entrypoint")]
    assert set(cm["data"]) == {"entrypoint.sh", "init.sh"}
    assert "flux run -N 3 -n 12 -g 2 ${command}" in cm["data"]["entrypoint.sh"]
    assert "--cores=0-3 --gpu=0-1" in cm["data"]["entrypoint.sh"]
    assert "lammps-node-0-[0-2]" in cm["data"]["init.sh"]
    assert "tcp://%h.lammps.hpc.svc.cluster.local:%p" in cm["data"]["init.sh"]
    secret = objs[("Secret", "lammps-flux-curve")]
    assert "type" not in secret  # Opaque, the API server's default
    assert base64.b64decode(secret["data"]["curve.cert"]).decode() == flux_curve_cert(
        "lammps", "4f1c"
    )
    order = [kind for kind, _ in objs]
    assert order.index("Secret") < order.index("JobSet")


def test_a_flux_trainjob_without_num_nodes_fails_its_reconcile() -> None:
    with pytest.raises(RenderError, match="numNodes"):
        render(trainjob(args=["x"]), flux_runtime(), gates=GATES, environment=ENV)


def _validate(job: dict[str, Any], runtime: dict[str, Any]) -> list[FieldError]:
    info = new_runtime_info(job, runtime, ENV)
    return Flux(ENV).validate(info, job, ValidationContext(gates=GATES))


@pytest.mark.parametrize(
    ("trainer", "policy_procs", "errors"),
    [
        ({"numNodes": 1}, 1, []),
        (
            {"numNodes": 1, "numProcPerNode": 0},
            1,
            [
                FieldError(
                    "spec.trainer.numProcPerNode",
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            ],
        ),
        (
            {"numNodes": 1},
            0,
            [
                FieldError(
                    "spec.trainer.numProcPerNode",
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            ],
        ),
        ({"numNodes": 1, "numProcPerNode": 2}, 0, []),
    ],
    ids=[
        "defaults are valid",
        "zero processes from the TrainJob are rejected",
        "zero processes from the policy are rejected (v2.3 reads both)",
        "the TrainJob's value overrides a bad policy value",
    ],
)
def test_validation_of_processes(
    trainer: dict[str, Any], policy_procs: int, errors: list[FieldError]
) -> None:
    runtime = flux_runtime()
    runtime["spec"]["mlPolicy"]["flux"]["numProcPerNode"] = policy_procs
    assert _validate(trainjob(**trainer), runtime) == errors


def test_validation_reserves_the_installer_name() -> None:
    runtime = flux_runtime()
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    pod["initContainers"] = [{"name": "flux-installer", "image": "x"}]
    assert _validate(trainjob(numNodes=1), runtime) == [
        FieldError("spec.trainer.initContainers", "InitContainer 'flux-installer' is reserved")
    ]


def flux_builder_runtime(**job: Any) -> dict[str, Any]:
    return make_runtime("flux").flux(numProcPerNode=1).job("node", ancestor="trainer", **job).obj()


@pytest.mark.parametrize(
    ("job", "runtime", "expected"),
    [
        pytest.param(
            make_trainjob().runtime("flux").trainer(num_nodes=1, num_proc_per_node=0).obj(),
            flux_builder_runtime(),
            [
                (
                    "spec.trainer.numProcPerNode",
                    "must be greater than or equal to 1 for Flux TrainJob",
                )
            ],
            id="a Flux job needs a process per node",
        ),
        pytest.param(
            make_trainjob().runtime("flux").trainer(num_nodes=1).obj(),
            flux_builder_runtime(init_containers=[{"name": "flux-installer", "image": "x"}]),
            [("spec.trainer.initContainers", "InitContainer 'flux-installer' is reserved")],
            id="the flux-installer init container name is reserved",
        ),
    ],
)
def test_admission_through_validate_trainjob(
    job: dict[str, Any], runtime: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert error_pairs(validate_trainjob(job, runtime).errors) == expected
