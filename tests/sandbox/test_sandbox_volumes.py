"""Volumes: files and modes from ConfigMaps, Secrets and projected sources; claims that last."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import MODES, make_ctx, make_pod, run, sh

from kubetrain.local.sandbox import PodSandbox, SandboxError
from kubetrain.local.sandbox.volumes import prepare_volumes

DATA: dict[str, Any] = {"config_maps": {"hostfile": {"hostfile": "a slots=2\n", "other": "x"}, "tls": {"ca.crt": "CA"}},
        "secrets": {"ssh": {"ssh-privatekey": b"PRIV", "ssh-publickey": b"PUB"}},
        "tokens": {"trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/tj/status": "TOKEN"}}  # fmt: skip

FILE_CASES = [
    ("a ConfigMap item gets its own mode",
     {"configMap": {"name": "hostfile", "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]}},
     "hostfile", 0o444, "a slots=2\n"),
    ("a ConfigMap without items projects every key with 0644",
     {"configMap": {"name": "hostfile"}}, "other", 0o644, "x"),
    ("a Secret's defaultMode applies to items without a mode",
     {"secret": {"secretName": "ssh", "defaultMode": 0o400,
                 "items": [{"key": "ssh-publickey", "path": "authorized_keys"}]}},
     "authorized_keys", 0o400, "PUB"),
    ("a Secret item mode overrides defaultMode",
     {"secret": {"secretName": "ssh", "defaultMode": 0o400,
                 "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640}]}},
     "id_rsa", 0o640, "PRIV"),
    ("an item path may create subdirectories",
     {"configMap": {"name": "tls", "items": [{"key": "ca.crt", "path": "certs/ca.crt"}]}},
     "certs/ca.crt", 0o644, "CA"),
    ("a projected token uses the supplied token for its audience",
     {"projected": {"defaultMode": 0o440, "sources": [{"serviceAccountToken": {
         "audience": "trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/tj/status",
         "expirationSeconds": 3600, "path": "token"}}]}},
     "token", 0o440, "TOKEN"),
    ("a projected ConfigMap item sits beside the token",
     {"projected": {"sources": [{"configMap": {"name": "tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
     "ca.crt", 0o644, "CA"),
    ("a downwardAPI item writes a field",
     {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
     "name", 0o644, "p"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("volume", "path", "mode", "content"),
    [c[1:] for c in FILE_CASES],
    ids=[c[0] for c in FILE_CASES],
)
def test_data_volume_files_and_modes(
    tmp_path: Path, volume: dict[str, Any], path: str, mode: int, content: str
) -> None:
    pod = make_pod(containers=[sh("true")], volumes=[{"name": "v", **volume}])
    paths = prepare_volumes(pod, make_ctx(tmp_path, **DATA))
    f = paths["v"] / path
    assert stat.S_IMODE(f.stat().st_mode) == mode
    assert f.read_text() == content


def test_rewriting_a_volume_drops_keys_that_are_gone(tmp_path: Path) -> None:
    pod = make_pod(
        containers=[sh("true")],
        volumes=[{"name": "v", "configMap": {"name": "c", "defaultMode": 0o400}}],
    )
    paths = prepare_volumes(pod, make_ctx(tmp_path, config_maps={"c": {"a": "1", "b": "2"}}))
    paths = prepare_volumes(pod, make_ctx(tmp_path, config_maps={"c": {"a": "3"}}))
    assert sorted(p.name for p in paths["v"].iterdir()) == ["a"]
    assert (paths["v"] / "a").read_text() == "3"


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        pytest.param({"configMap": {"name": "absent"}}, "configmap 'absent' not found", id="a missing ConfigMap"),
        pytest.param({"secret": {"secretName": "ssh", "items": [{"key": "k", "path": "x"}]}},
                     "key 'k' in secret 'ssh' not found", id="a missing Secret key"),
        pytest.param({"configMap": {"name": "tls", "items": [{"key": "ca.crt", "path": "../escape"}]}},
                     "must be relative and stay inside", id="an item path escaping the volume"),
        pytest.param({"projected": {"sources": [{"serviceAccountToken": {"audience": "nobody", "path": "t"}}]}},
                     "no service account token supplied", id="a token nobody supplied"),
        pytest.param({"nfs": {"server": "x"}}, "unsupported volume type", id="a volume type with no local meaning"),
    ],
)  # fmt: skip
def test_volume_errors(tmp_path: Path, volume: dict[str, Any], message: str) -> None:
    pod = make_pod(containers=[sh("true")], volumes=[{"name": "v", **volume}])
    with pytest.raises(SandboxError, match=message):
        prepare_volumes(pod, make_ctx(tmp_path, **DATA))


@pytest.mark.parametrize("mode", MODES)
async def test_a_claim_outlives_its_pod_and_is_shared_by_name(tmp_path: Path, mode: str) -> None:
    claims = tmp_path / "claims"
    volumes = [{"name": "out", "persistentVolumeClaim": {"claimName": "results"}}]
    mount = [{"name": "out", "mountPath": "/workspace/output"}]
    writer = make_pod(
        "w",
        containers=[sh("echo 42 > /workspace/output/answer", volumeMounts=mount)],
        volumes=volumes,
    )
    result, logs = await run(writer, make_ctx(tmp_path, mode, pod="w", claims_dir=claims))
    assert result.containers == {"main": 0}, logs
    assert (claims / "default" / "results" / "answer").read_text() == "42\n"
    reader = make_pod(
        "r", containers=[sh("cat /workspace/output/answer", volumeMounts=mount)], volumes=volumes
    )
    result, logs = await run(reader, make_ctx(tmp_path, mode, pod="r", claims_dir=claims))
    assert result.containers == {"main": 0}
    assert logs["main"].splitlines()[-1] == "42"


@pytest.mark.parametrize("mode", MODES)
async def test_an_empty_dir_is_shared_by_init_and_main_containers(
    tmp_path: Path, mode: str
) -> None:
    mount = [{"name": "scratch", "mountPath": "/scratch"}]
    pod = make_pod(
        init=[sh("echo from-init > /scratch/f", name="prep", volumeMounts=mount)],
        containers=[sh("cat /scratch/f", volumeMounts=mount)],
        volumes=[{"name": "scratch", "emptyDir": {}}],
    )
    result, logs = await run(pod, make_ctx(tmp_path, mode))
    assert result.succeeded, logs
    assert logs["main"].splitlines()[-1] == "from-init"


def test_a_key_can_turn_into_a_directory_and_back(tmp_path: Path) -> None:
    def volume(path: str) -> dict[str, Any]:
        items = [{"key": "a", "path": path}]
        return {"name": "v", "configMap": {"name": "c", "items": items}}

    ctx = make_ctx(tmp_path, config_maps={"c": {"a": "1"}})
    paths = prepare_volumes(make_pod(containers=[sh("true")], volumes=[volume("x")]), ctx)
    paths = prepare_volumes(make_pod(containers=[sh("true")], volumes=[volume("x/y")]), ctx)
    assert (paths["v"] / "x" / "y").read_text() == "1"
    paths = prepare_volumes(make_pod(containers=[sh("true")], volumes=[volume("x")]), ctx)
    assert (paths["v"] / "x").read_text() == "1"
    assert sorted(p.name for p in paths["v"].rglob("*")) == ["x"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_running_container_sees_its_config_updated_in_place(
    tmp_path: Path, mode: str
) -> None:
    # What happens when a restarted daemon adopts a pod and prepares it again: the
    # container's view of the volume must follow, never go empty.
    script = (
        'for i in $(seq 200); do v=$(cat /cfg/value); echo "$v"; '
        '[ "$v" = new ] && exit 0; [ -n "$v" ] || exit 9; sleep 0.02; done; exit 1'
    )
    pod = make_pod(
        containers=[sh(script, volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}])],
        volumes=[{"name": "cfg", "configMap": {"name": "c", "defaultMode": 0o400}}],
    )
    first = PodSandbox(pod, make_ctx(tmp_path, mode, config_maps={"c": {"value": "old"}}))
    proc = await first.start_container("main")
    await asyncio.sleep(0.3)
    later = PodSandbox.adopt(pod, make_ctx(tmp_path, mode, config_maps={"c": {"value": "new"}}))
    later.prepare()
    assert await proc.wait() == 0, proc.log_path.read_text()
    assert proc.log_path.read_text().split()[-1] == "new"
