"""The overlay: what the local engine adds to a framework pod's sandbox, and nothing else."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.frameworks import jax_overlay, pod_overlay, with_framework_images
from kubetrain.local.frameworks.ssh import RSH_AGENT_PATH, own_names, rsh_agent, sshd_config_path
from kubetrain.local.sandbox import ImageEnv, ImageMap

SSHD = {"command": ["/usr/sbin/sshd"], "args": ["-De", "-f", "/home/mpiuser/.sshd_config"]}
MOUNT = [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
POD = {
    "metadata": {"name": "tj-node-0-0-abcde", "namespace": "ns"},
    "spec": {"hostname": "tj-node-0-0", "subdomain": "tj"},
}


def secret_dir(tmp_path: Path) -> Path:
    d = tmp_path / "vol"
    d.mkdir(parents=True)
    for name, mode in (("id_rsa", 0o640), ("id_rsa.pub", 0o644), ("authorized_keys", 0o644)):
        (d / name).write_text(name)
        (d / name).chmod(mode)
    return d


def overlay(tmp_path: Path, container: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return pod_overlay(
        POD, container, pod_ip="127.0.9.9", env=env or {"PATH": "/venv/bin:/usr/bin"},
        volumes={"mpi-ssh-auth": secret_dir(tmp_path)}, work_dir=tmp_path / "work",
    )  # fmt: skip


def test_an_sshd_node_gets_its_config_on_its_own_address_with_the_image_path(
    tmp_path: Path,
) -> None:
    ov = overlay(tmp_path, {"name": "node", **SSHD, "volumeMounts": MOUNT})
    targets = {target: src for src, target in ov.files}
    config = targets["/home/mpiuser/.sshd_config"].read_text()
    assert "Port 2222" in config and "ListenAddress 127.0.9.9" in config
    assert (
        "HostKey /home/mpiuser/.ssh/id_rsa" in config and "SetEnv PATH=/venv/bin:/usr/bin" in config
    )
    assert "StrictHostKeyChecking no" in targets["/etc/ssh/ssh_config"].read_text()
    assert RSH_AGENT_PATH in targets
    assert ov.env == {}  # a node is no launcher


def test_a_launcher_gets_the_rsh_agent_unless_it_sets_its_own(tmp_path: Path) -> None:
    launcher = {"name": "node", "command": ["mpirun"], "volumeMounts": MOUNT,
                "env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]}  # fmt: skip
    assert overlay(tmp_path, launcher).env == {"OMPI_MCA_plm_rsh_agent": RSH_AGENT_PATH}
    assert overlay(tmp_path / "x", launcher, {"OMPI_MCA_plm_rsh_agent": "ssh"}).env == {}


def test_the_ssh_secret_files_stop_being_the_pod_users(tmp_path: Path) -> None:
    ov = overlay(tmp_path, {"name": "node", **SSHD, "volumeMounts": MOUNT})
    key = tmp_path / "vol" / "id_rsa"
    if os.geteuid() == 0:
        # Given to nobody, mode untouched: as on a cluster, where root owns them.
        assert key.stat().st_uid == 65534 and stat.S_IMODE(key.stat().st_mode) == 0o640
    else:
        copies = [src for src, target in ov.files if target.endswith("/id_rsa")]
        assert copies and stat.S_IMODE(copies[0].stat().st_mode) == 0o400


def test_a_container_without_the_ssh_secret_gets_nothing(tmp_path: Path) -> None:
    ov = pod_overlay(POD, {"name": "node", "command": ["python"]}, pod_ip="127.0.0.2",
                     env={}, volumes={}, work_dir=tmp_path)  # fmt: skip
    assert not ov


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["/usr/sbin/sshd", "-De", "-f", "/x/c"], "/x/c", id="-f PATH"),
        pytest.param(["sshd", "-f/x/c"], "/x/c", id="-fPATH"),
        pytest.param(["sshd", "-De"], None, id="no -f: the image's default config"),
        pytest.param(["python", "-f", "/x/c"], None, id="not sshd"),
    ],
)
def test_sshd_config_path(argv: list[str], expected: str | None) -> None:
    assert sshd_config_path({"command": argv[:1], "args": argv[1:]}) == expected


def test_own_names_are_the_cluster_dns_names_and_the_address() -> None:
    assert own_names(POD, "127.0.9.9") == [
        "tj-node-0-0", "tj-node-0-0.tj", "tj-node-0-0.tj.ns.svc",
        "tj-node-0-0.tj.ns.svc.cluster.local", "127.0.9.9",
    ]  # fmt: skip


def test_the_rsh_agent_runs_own_names_here_and_passes_others_to_ssh(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_text(rsh_agent(["me.tj", "127.0.9.9"]))
    agent.chmod(0o755)
    fake_ssh = tmp_path / "bin" / "ssh"
    fake_ssh.parent.mkdir()
    fake_ssh.write_text('#!/bin/sh\necho "ssh $*"\n')
    fake_ssh.chmod(0o755)
    env = {"PATH": f"{fake_ssh.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "USER": "u"}

    def run(*args: str) -> str:
        return subprocess.run([str(agent), *args], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    assert (
        run("-o", "ConnectionAttempts=10", "me.tj", "echo", "local", "$HOME") == f"local {tmp_path}"
    )
    assert run("-o", "ConnectionAttempts=10", "other.tj", "orted", "-x") == (
        "ssh -o ConnectionAttempts=10 other.tj orted -x"
    )


def test_jax_binds_its_coordinator_to_the_pod_address_unless_told_otherwise() -> None:
    env = {"JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500"}
    assert jax_overlay("127.0.9.9", env).env == {"JAX_COORDINATOR_BIND_ADDRESS": "127.0.9.9:29500"}
    assert not jax_overlay("127.0.9.9", {**env, "JAX_COORDINATOR_BIND_ADDRESS": "[::]:1"})
    assert not jax_overlay("127.0.9.9", {})


def test_mpi_runtime_images_run_as_mpiuser_and_user_entries_keep_precedence(tmp_path: Path) -> None:
    mine = ImageEnv(prefix=tmp_path)
    images = with_framework_images(
        ImageMap(images={"ghcr.io/kubeflow/trainer/mlx-runtime:*": mine})
    )
    ds = images.resolve("ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0")
    assert ds.users == {1000: ("mpiuser", "/home/mpiuser")}
    mlx = images.resolve("ghcr.io/kubeflow/trainer/mlx-runtime:v2.3.0")
    assert mlx.prefix == tmp_path and mlx.users == {1000: ("mpiuser", "/home/mpiuser")}
    assert images.resolve("nvcr.io/nvidia/jax:25.10-py3").users == {}


def test_the_controller_image_runs_kubetrain_controller_and_user_entries_keep_precedence(
    tmp_path: Path,
) -> None:
    from kubetrain.controller.deploy import install_objects

    deployment = next(o for o in install_objects("manager") if o["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert with_framework_images(ImageMap()).resolve(image).entrypoint == (
        "kubetrain",
        "controller",
    )
    mine = ImageEnv(prefix=tmp_path)
    images = with_framework_images(ImageMap(images={"ghcr.io/kubetrain/controller:*": mine}))
    resolved = images.resolve(image)
    assert resolved.prefix == tmp_path and resolved.entrypoint == ("kubetrain", "controller")
    pinned = ImageEnv(prefix=tmp_path, entrypoint=("my-controller",))
    images = with_framework_images(ImageMap(images={"ghcr.io/kubetrain/controller:*": pinned}))
    assert images.resolve(image).entrypoint == ("my-controller",)
