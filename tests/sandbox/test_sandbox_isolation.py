"""What a pod sees inside bwrap: its own hostname, peers by DNS name, volumes at their paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import make_ctx, make_pod, needs_bwrap, run, sh

import kubetrain
from kubetrain.local.sandbox import loopback_address, pod_dns_names

pytestmark = needs_bwrap

TJ = "tj"


def peers() -> dict[str, str]:
    hosts: dict[str, str] = {}
    for i in range(2):
        for name in pod_dns_names(f"{TJ}-node-0-{i}", TJ, "default"):
            hosts[name] = loopback_address(i)
    return hosts


def node_pod(script: str, **kw: Any) -> dict[str, Any]:
    return make_pod(
        "tj-node-0-1-x7k2p", hostname=f"{TJ}-node-0-1", subdomain=TJ, containers=[sh(script)], **kw
    )


async def test_hostname_is_the_pods(tmp_path: Path) -> None:
    result, logs = await run(
        node_pod("hostname; cat /etc/hostname; echo $HOSTNAME"), make_ctx(tmp_path)
    )
    assert result.succeeded, logs
    assert logs["main"].split() == [f"{TJ}-node-0-1"] * 3


NAME_CASES = [
    ("the short hostname", "tj-node-0-0", "127.0.0.2"),
    ("hostname.subdomain, as PET_MASTER_ADDR uses it", "tj-node-0-0.tj", "127.0.0.2"),
    ("the namespaced service form", "tj-node-0-1.tj.default.svc", "127.0.0.3"),
    ("the fully qualified form", "tj-node-0-1.tj.default.svc.cluster.local", "127.0.0.3"),
    ("localhost", "localhost", "127.0.0.1"),
]


@pytest.mark.parametrize(
    ("name", "ip"), [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES]
)
async def test_peer_names_resolve_to_their_loopback_addresses(
    tmp_path: Path, name: str, ip: str
) -> None:
    code = f"import socket; print(socket.gethostbyname({name!r}))"
    pod = node_pod(f"{sys.executable} -c {code!r}")
    result, logs = await run(pod, make_ctx(tmp_path, pod_ip="127.0.0.3", hosts=peers()))
    assert result.succeeded, logs
    assert logs["main"].split()[-1] == ip


MOUNT_CASES = [
    ("a workspace path absent on the host", "/workspace"),
    ("a new directory under the host's /etc", "/etc/mpi"),
    ("a home directory for a user the host lacks", "/home/mpiuser/.ssh"),
    ("a path through the /var/run symlink", "/var/run/secrets/kubeflow/trainer"),
    ("a path deep below /opt", "/opt/kubetrain-test/a/b"),
]


@pytest.mark.parametrize("target", [c[1] for c in MOUNT_CASES], ids=[c[0] for c in MOUNT_CASES])
async def test_a_volume_appears_at_its_mount_path_without_touching_the_host(
    tmp_path: Path, target: str
) -> None:
    assert not os.path.exists(target) or target == "/var/run/secrets/kubeflow/trainer"
    pod = node_pod(
        f"cat {target}/hostfile && ls -ld {target}",
        volumes=[{"name": "hf", "configMap": {"name": "hf"}}],
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "hf", "mountPath": target}]
    result, logs = await run(
        pod, make_ctx(tmp_path, config_maps={"hf": {"hostfile": "tj-node-0-0.tj slots=2"}})
    )
    assert result.succeeded, logs
    assert "tj-node-0-0.tj slots=2" in logs["main"]
    if target != "/var/run/secrets/kubeflow/trainer":
        assert not os.path.exists(target), "the host must stay untouched"


async def test_read_only_mounts_and_host_filesystem_refuse_writes(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        touch /ro/x 2>/dev/null && echo ro-writable || echo ro-refused
        touch /rw/x && echo rw-written
        touch /usr/kubetrain-probe 2>/dev/null && echo host-writable || echo host-refused
        echo private > /tmp/kubetrain-private-probe && echo tmp-written
    """)
    pod = node_pod(script, volumes=[{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}])
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "a", "mountPath": "/ro", "readOnly": True}, {"name": "b", "mountPath": "/rw"},
    ]  # fmt: skip
    ctx = make_ctx(tmp_path)
    result, logs = await run(pod, ctx)
    assert result.succeeded, logs
    assert logs["main"].split() == ["ro-refused", "rw-written", "host-refused", "tmp-written"]
    assert (ctx.pod_dir / "volumes" / "b" / "x").exists()
    assert not Path("/tmp/kubetrain-private-probe").exists(), "/tmp must be private"


async def test_the_pod_has_its_own_pid_namespace(tmp_path: Path) -> None:
    result, logs = await run(node_pod("ls /proc | grep -c '^[0-9]'"), make_ctx(tmp_path))
    assert result.succeeded, logs
    # bwrap's init, bash and ls (or grep): nothing of the host.
    assert int(logs["main"].split()[-1]) <= 4


def _system_python_fits() -> bool:
    """A system python3 of the project's minimum version, to run as an unprivileged user."""
    if not os.access("/usr/bin/python3", os.X_OK):
        return False
    check = "import sys; sys.exit(sys.version_info < (3, 11))"
    return subprocess.run(["/usr/bin/python3", "-c", check], check=False).returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not _system_python_fits(),
    reason="needs root to drop to an unprivileged user, and a system python3 >= 3.11",
)
def test_an_unprivileged_user_gets_the_same_sandbox() -> None:
    # pytest's tmp dirs are private to root, so this one is made world-writable by hand.
    with tempfile.TemporaryDirectory(prefix="kubetrain-unpriv-") as tmp:
        os.chmod(tmp, 0o777)
        _run_unprivileged(Path(tmp))


def _run_unprivileged(tmp_path: Path, network: bool = False) -> None:
    # The test venv's interpreter and the clone may sit where the user cannot read (root's
    # home, a private directory): a system python3 and a copy of the package in the
    # world-readable temporary directory stand in for an unprivileged user's install.
    src = tmp_path / "src"
    shutil.copytree(
        Path(kubetrain.__file__).parent, src / "kubetrain",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    for path in [src, *src.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    # With ``network``: the pod gets its own namespace and address on a rootless pod network.
    script = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from kubetrain.local.sandbox import PodNetwork, PodSandbox, SandboxContext, sandbox_mode
        tmp = Path({str(tmp_path)!r})
        cmd = "hostname; id -u; touch /workspace/ok"
        enter = ()
        if {network!r}:
            net = PodNetwork.open(tmp / "net")
            enter = tuple(net.enter_pod(net.attach(tmp / "pod", "10.88.0.2")))
            cmd += "; cat /sys/class/net/eth0/address >/dev/null && echo eth0"
        pod = {{"metadata": {{"name": "u", "namespace": "default"}},
               "spec": {{"hostname": "unpriv-0", "restartPolicy": "Never",
                        "volumes": [{{"name": "w", "emptyDir": {{}}}}],
                        "containers": [{{"name": "c", "command": ["sh", "-c", cmd],
                                        "volumeMounts": [{{"name": "w", "mountPath": "/workspace"}}]}}]}}}}
        ctx = SandboxContext(pod_dir=tmp / "pod", log_dir=tmp / "logs", pod_ip="10.88.0.2",
                             enter_netns=enter)
        print(sandbox_mode().mode)
        try:
            print(asyncio.run(PodSandbox(pod, ctx).run()).containers["c"])
        finally:
            if enter:
                PodNetwork.detach(tmp / "pod")
                net.close()
    """)
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PYTHONPATH": str(src), "HOME": str(tmp_path), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["bwrap", "0"]
    log = (tmp_path / "logs" / "default" / "u" / "c.log").read_text().split()
    # In the pod network's user namespace the pod's user is that namespace's root.
    assert log == (["unpriv-0", "0", "eth0"] if network else ["unpriv-0", "65534"])
    assert (tmp_path / "pod" / "volumes" / "w" / "ok").exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not _system_python_fits(),
    reason="needs root to drop to an unprivileged user, and a system python3 >= 3.11",
)
def test_an_unprivileged_user_gets_a_pod_network() -> None:
    from kubetrain.local.sandbox import network_probe

    if not network_probe().available:
        pytest.skip(network_probe().reason)
    with tempfile.TemporaryDirectory(prefix="kubetrain-unpriv-") as tmp:
        os.chmod(tmp, 0o777)
        _run_unprivileged(Path(tmp), network=True)


async def test_a_working_dir_that_exists_nowhere_is_created(tmp_path: Path) -> None:
    pod = node_pod("pwd; touch here")
    pod["spec"]["containers"][0]["workingDir"] = "/workspace/run"
    result, logs = await run(pod, make_ctx(tmp_path))
    assert result.succeeded, logs
    assert logs["main"].split() == ["/workspace/run"]
    assert not os.path.exists("/workspace")


@pytest.mark.parametrize(
    ("security", "users", "expected"),
    [
        pytest.param({"runAsUser": 1000, "runAsGroup": 1000}, {1000: ("mpiuser", "/home/mpiuser")},
                     "1000 1000 mpiuser /home/mpiuser", id="runAsUser takes the image mapping's name and home"),
        pytest.param({"runAsUser": 4242, "runAsGroup": 4242}, {},
                     "4242 4242 user4242 /", id="an unknown uid still gets a passwd entry"),
    ],
)  # fmt: skip
async def test_run_as_user_maps_the_ids_and_names_the_user(
    tmp_path: Path, security: dict[str, int], users: dict[int, tuple[str, str]], expected: str
) -> None:
    from kubetrain.local.sandbox import ImageEnv, ImageMap

    pod = node_pod('echo $(id -u) $(id -g) $(id -un) "$HOME"; touch /w/mine')
    pod["spec"]["securityContext"] = security
    pod["spec"]["volumes"] = [{"name": "w", "emptyDir": {}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "w", "mountPath": "/w"}]
    images = ImageMap(default=ImageEnv(prefix=Path(sys.prefix), users=users))
    ctx = make_ctx(tmp_path, images=images)
    result, logs = await run(pod, ctx)
    assert result.succeeded, logs
    assert logs["main"].strip() == expected
    # On the host the file belongs to whoever runs the sandbox.
    assert (ctx.pod_dir / "volumes" / "w" / "mine").stat().st_uid == os.geteuid()


async def test_an_overlay_adds_files_over_volumes_and_env_the_container_lacks(
    tmp_path: Path,
) -> None:
    from collections.abc import Mapping

    from kubetrain.local.sandbox import ContainerOverlay

    extra = tmp_path / "ssh_config"
    extra.write_text("Host *\n  Port 2222\n")

    class Extra:
        # Over a file of a read-only volume, and beside that volume where nothing exists.
        files = ((extra, "/home/mpiuser/.ssh/id_rsa"), (extra, "/home/mpiuser/.sshd_config"))
        env: Mapping[str, str] = {"FROM_OVERLAY": "yes", "MINE": "overlay"}

    seen: dict[str, object] = {}

    def hook(pod: Mapping[str, Any], container: Mapping[str, Any], *, pod_ip: str,
             env: Mapping[str, str], volumes: Mapping[str, Path], work_dir: Path) -> ContainerOverlay:  # fmt: skip
        seen.update(pod_ip=pod_ip, mine=env.get("MINE"), volumes=sorted(volumes), work_dir=work_dir)
        return Extra()

    pod = node_pod(
        "cat /home/mpiuser/.ssh/id_rsa /home/mpiuser/.sshd_config; echo $FROM_OVERLAY $MINE",
        volumes=[{"name": "ssh", "secret": {"secretName": "ssh", "defaultMode": 0o400}}],
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "ssh", "mountPath": "/home/mpiuser/.ssh"}
    ]
    pod["spec"]["containers"][0]["env"] = [{"name": "MINE", "value": "container"}]
    ctx = make_ctx(tmp_path, secrets={"ssh": {"id_rsa": b"KEY\n"}}, overlay=hook)
    result, logs = await run(pod, ctx)
    assert result.succeeded, logs
    assert logs["main"].split() == [*["Host", "*", "Port", "2222"] * 2, "yes", "container"]
    assert seen["pod_ip"] == "127.0.0.2" and seen["mine"] == "container"
    assert seen["volumes"] == ["ssh"]
    assert isinstance(seen["work_dir"], Path) and seen["work_dir"].is_dir()


def test_the_frameworks_overlay_fits_the_hook() -> None:
    # kubetrain.local.frameworks.pod_overlay is the hook the daemon is meant to pass.
    frameworks = pytest.importorskip("kubetrain.local.frameworks")
    from kubetrain.local.sandbox import OverlayHook

    hook: OverlayHook = frameworks.pod_overlay
    pod = make_pod(containers=[{"name": "node", "command": ["true"]}])
    out = hook(pod, pod["spec"]["containers"][0], pod_ip="127.0.0.5",
               env={"JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500"}, volumes={},
               work_dir=Path("/nonexistent"))  # fmt: skip
    assert dict(out.env) == {"JAX_COORDINATOR_BIND_ADDRESS": "127.0.0.5:29500"}
