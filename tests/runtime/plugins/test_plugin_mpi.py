"""MPI plugin (trainer v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go): counts, slots, hostfile, SSH Secret, volumes, env, validation.

Expectations are written from the reference by hand; rendering goes through the real pipeline.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from runtime_helpers import error_pairs

from kubetrain.api.errors import FieldError
from kubetrain.runtime import validate_trainjob
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.core import new_runtime_info
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.framework import Existing, ObjectRef, RenderError, ValidationContext
from kubetrain.runtime.plugins.mpi import MPI
from kubetrain.runtime.render import existing_refs, render
from kubetrain.runtime.sshkeys import ssh_keypair_from_seed
from kubetrain.testing import make_runtime, make_trainjob

GATES = FeatureGates.upstream_defaults()
KEYS = ssh_keypair_from_seed(b"mpi-tests")
ENV = Environment(ssh_keypair=lambda: KEYS)
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def deepspeed() -> dict[str, Any]:
    return next(r for r in default_runtimes() if r["metadata"]["name"] == "deepspeed-distributed")


def launcher_first_runtime(*, launcher_as_node: bool, slots: int = 1) -> dict[str, Any]:
    """A v2.2-style MPI runtime: launcher listed before node, no dependsOn."""
    rt = deepspeed()
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    node, launcher = jobs
    launcher.pop("dependsOn")
    rt["spec"]["template"]["spec"]["replicatedJobs"] = [launcher, node]
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = launcher_as_node
    rt["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = slots
    return rt


def trainjob(name: str = "alpha", **trainer: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "deepspeed-distributed"}}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team", "uid": "uid-1"},
        "spec": spec,
    }


def objects(
    job: dict[str, Any], runtime: dict[str, Any], existing: Existing | None = None
) -> dict[tuple[str, str], Any]:
    plan = render(job, runtime, gates=GATES, environment=ENV, existing=existing)
    return {(o["kind"], o["metadata"]["name"]): o for o in plan.objects}


def pod(jobset: dict[str, Any], job_name: str) -> dict[str, Any]:
    rjob = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == job_name)
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def parallelism(jobset: dict[str, Any], job_name: str) -> int:
    rjob = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == job_name)
    value: int = rjob["template"]["spec"]["parallelism"]
    return value


@pytest.mark.parametrize(
    ("runtime", "trainer", "node_count", "launcher_count"),
    [
        (deepspeed(), {"numNodes": 3}, 2, 1),
        (launcher_first_runtime(launcher_as_node=False), {"numNodes": 3}, 3, 1),
        (deepspeed(), {"numNodes": 1}, 1, 1),
        (deepspeed(), {"image": "x"}, 1, 1),
    ],
    ids=[
        "with runLauncherAsNode the launcher is one of the numNodes",
        "without runLauncherAsNode every numNode is a node pod",
        "one node with runLauncherAsNode still keeps one node pod",
        "without trainer.numNodes the node job keeps its parallelism",
    ],
)
def test_counts(
    runtime: dict[str, Any], trainer: dict[str, Any], node_count: int, launcher_count: int
) -> None:
    jobset = objects(trainjob(**trainer), runtime)[("JobSet", "alpha")]
    assert parallelism(jobset, "node") == node_count
    assert parallelism(jobset, "launcher") == launcher_count


def test_hostfile_of_the_reference_example() -> None:
    # trainer v2.3.0 pkg/runtime/framework/plugins/mpi/mpi.go: job alpha, 2 nodes, 8 slots (launcher not a rank).
    runtime = launcher_first_runtime(launcher_as_node=False, slots=8)
    cm = objects(trainjob(numNodes=2), runtime)[("ConfigMap", "alpha-mpi-hostfile")]
    assert cm["data"] == {
        "hostfile": "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"
    }
    assert cm["metadata"]["namespace"] == "team"
    assert cm["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        (deepspeed(), ["alpha-node-0-0.alpha", "alpha-node-0-1.alpha", "alpha-launcher-0-0.alpha"]),
        (
            launcher_first_runtime(launcher_as_node=True),
            ["alpha-launcher-0-0.alpha", "alpha-node-0-0.alpha", "alpha-node-0-1.alpha"],
        ),
    ],
    ids=[
        "v2.3 runtimes list node first, so the launcher line comes last",
        "v2.2-style runtimes list the launcher first, so its line comes first",
    ],
)
def test_hostfile_follows_replicated_job_order(
    runtime: dict[str, Any], expected: list[str]
) -> None:
    cm = objects(trainjob(numNodes=3), runtime)[("ConfigMap", "alpha-mpi-hostfile")]
    assert cm["data"]["hostfile"] == "".join(f"{e} slots=1\n" for e in expected)


def test_hostfile_uses_the_runtime_subdomain() -> None:
    runtime = deepspeed()
    runtime["spec"]["template"]["spec"]["network"]["subdomain"] = "mesh"
    cm = objects(trainjob(numNodes=2), runtime)[("ConfigMap", "alpha-mpi-hostfile")]
    assert (
        cm["data"]["hostfile"] == "alpha-node-0-0.mesh slots=1\nalpha-launcher-0-0.mesh slots=1\n"
    )


@pytest.mark.parametrize(
    ("policy_slots", "trainer", "slots"),
    [
        (1, {"numProcPerNode": 3}, "3"),
        (1, {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}, "4"),
        (2, {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}, "2"),
        (1, {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, "1"),
        (5, {}, "5"),
    ],
    ids=[
        "trainer numProcPerNode wins",
        "policy 1 with four GPUs gives four slots",
        "a policy value other than 1 is kept despite GPUs",
        "one GPU keeps one slot",
        "the policy value without a trainer",
    ],
)
def test_slots(policy_slots: int, trainer: dict[str, Any], slots: str) -> None:
    runtime = deepspeed()
    runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = policy_slots
    objs = objects(trainjob(numNodes=2, **trainer), runtime)
    env = {
        e["name"]: e.get("value")
        for e in pod(objs[("JobSet", "alpha")], "launcher")["containers"][0]["env"]
    }
    assert env["OMPI_MCA_orte_set_default_slots"] == slots
    assert objs[("ConfigMap", "alpha-mpi-hostfile")]["data"]["hostfile"].endswith(
        f"slots={slots}\n"
    )


def test_volumes_mounts_and_openmpi_env() -> None:
    jobset = objects(trainjob(numNodes=2, env=[{"name": "USER_VAR", "value": "u"}]), deepspeed())[
        ("JobSet", "alpha")
    ]
    ssh_volume = {
        "name": "mpi-ssh-auth",
        "secret": {
            "secretName": "alpha-mpi-ssh-auth",
            "items": [
                {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
            ],
            "defaultMode": 0o400,
        },
    }
    hostfile_volume = {
        "name": "mpi-hostfile",
        "configMap": {
            "name": "alpha-mpi-hostfile",
            "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
        },
    }
    node, launcher = pod(jobset, "node"), pod(jobset, "launcher")
    assert node["volumes"] == [ssh_volume]
    assert launcher["volumes"] == [ssh_volume, hostfile_volume]
    assert node["containers"][0]["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}
    ]
    assert launcher["containers"][0]["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    assert launcher["containers"][0]["env"] == [
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        {"name": "USER_VAR", "value": "u"},
    ]
    # Worker pods get the TrainJob's env (runLauncherAsNode) but no OpenMPI settings.
    assert node["containers"][0]["env"] == [{"name": "USER_VAR", "value": "u"}]


def test_ssh_auth_mount_path_defaults_to_root() -> None:
    runtime = deepspeed()
    del runtime["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"]
    jobset = objects(trainjob(numNodes=2), runtime)[("JobSet", "alpha")]
    assert pod(jobset, "node")["containers"][0]["volumeMounts"][0]["mountPath"] == "/root/.ssh"


def test_ssh_secret_is_created_once_with_the_injected_keys() -> None:
    objs = objects(trainjob(numNodes=2), deepspeed())
    secret = objs[("Secret", "alpha-mpi-ssh-auth")]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).decode() == KEYS[0]
    assert base64.b64decode(secret["data"]["ssh-publickey"]).decode() == KEYS[1]
    assert secret["metadata"]["ownerReferences"][0]["controller"] is True
    kinds = [k for k, _ in objs]
    assert kinds.index("Secret") < kinds.index("ConfigMap", 1) < kinds.index("JobSet")

    again = objects(trainjob(numNodes=2), deepspeed(), Existing.of(copy.deepcopy(secret)))
    assert ("Secret", "alpha-mpi-ssh-auth") not in again
    assert ("ConfigMap", "alpha-mpi-hostfile") in again, "the hostfile is re-applied every time"


def test_a_non_openmpi_implementation_fails_the_reconcile() -> None:
    runtime = deepspeed()
    runtime["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = ""
    with pytest.raises(RenderError, match="MPI implementation for  doesn't supported"):
        render(trainjob(numNodes=2), runtime, gates=GATES, environment=ENV)


def _validate(job: dict[str, Any], runtime: dict[str, Any]) -> list[FieldError]:
    info = new_runtime_info(job, runtime, ENV)
    return MPI(ENV).validate(info, job, ValidationContext(gates=GATES))


def test_validation_numnodes_needs_both_jobs_with_launcher_as_node() -> None:
    runtime = deepspeed()
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = [
        j for j in jobs if j["name"] == "launcher"
    ]
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0].pop("dependsOn")
    assert _validate(trainjob(numNodes=2), runtime) == [
        FieldError(
            "spec.trainer.numNodes",
            "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node",
        )
    ]
    assert _validate(trainjob(numNodes=1), runtime) == []


def test_validation_rejects_reserved_openmpi_env() -> None:
    job = trainjob(
        env=[
            {"name": "OMPI_MCA_plm_rsh_args", "value": "x"},
            {"name": "OK", "value": "1"},
            {"name": "OMPI_MCA_orte_default_hostfile", "value": "y"},
        ]
    )
    assert _validate(job, deepspeed()) == [
        FieldError(
            "spec.trainer.env",
            "must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]",
        )
    ]


def test_nothing_happens_without_an_mpi_policy() -> None:
    runtime = next(r for r in default_runtimes() if r["metadata"]["name"] == "torch-distributed")
    job = trainjob(numNodes=2)
    job["spec"]["runtimeRef"]["name"] = "torch-distributed"
    objs = objects(job, runtime)
    assert not any(kind in ("Secret",) or name.endswith("hostfile") for kind, name in objs)
    assert _validate(job, runtime) == []


def mpi_launcher_only() -> dict[str, Any]:
    return (
        make_runtime("mpi-one")
        .mpi(
            numProcPerNode=1,
            mpiImplementation="OpenMPI",
            sshAuthMountPath="/root/.ssh",
            runLauncherAsNode=True,
        )
        .job("launcher", ancestor="trainer")
        .obj()
    )


@pytest.mark.parametrize(
    ("job", "runtime", "expected"),
    [
        pytest.param(
            make_trainjob().runtime("deepspeed-distributed").trainer(num_nodes=2).obj(),
            deepspeed(),
            [],
            id="deepspeed with two nodes is admitted",
        ),
        pytest.param(
            make_trainjob().runtime("mpi-one").trainer(num_nodes=2).obj(),
            mpi_launcher_only(),
            [
                (
                    "spec.trainer.numNodes",
                    "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either"
                    " launcher and node",
                )
            ],
            id="launcher-as-node needs both jobs for several nodes",
        ),
        pytest.param(
            make_trainjob()
            .runtime("deepspeed-distributed")
            .trainer(env={"OMPI_MCA_plm_rsh_args": "x", "OMPI_MCA_orte_default_hostfile": "y"})
            .obj(),
            deepspeed(),
            [
                (
                    "spec.trainer.env",
                    "must not have reserved envs, invalid envs configured:"
                    " [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]",
                )
            ],
            id="reserved OpenMPI envs are rejected (v2.3)",
        ),
    ],
)
def test_admission_through_validate_trainjob(
    job: dict[str, Any], runtime: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert error_pairs(validate_trainjob(job, runtime).errors) == expected


@pytest.mark.parametrize(
    ("runtime_spec", "expected"),
    [
        pytest.param(
            {"mlPolicy": {"mpi": {"numProcPerNode": 1}}},
            [ObjectRef("v1", "Secret", "job-mpi-ssh-auth")],
            id="an MPI runtime reads back its SSH Secret",
        ),
        pytest.param({"mlPolicy": {"torch": {}}}, [], id="a torch runtime reads back no Secret"),
    ],
)
def test_objects_read_back(runtime_spec: dict[str, Any], expected: list[ObjectRef]) -> None:
    job = {"metadata": {"name": "job", "namespace": "ns"}}
    assert existing_refs(job, {"spec": runtime_spec}) == expected
