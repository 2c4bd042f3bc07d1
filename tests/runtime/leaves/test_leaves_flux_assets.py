"""Flux scripts and CURVE certificate (trainer v2.3.0 pkg/runtime/framework/plugins/flux/flux.go)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from kubetrain.runtime.flux_assets import (
    FLUX_BROKER_DEFAULTS,
    flux_broker_settings,
    flux_curve_cert,
    flux_entrypoint_script,
    flux_hostlist,
    flux_init_script,
    flux_range,
    z85_encode,
)

Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


def z85_decode(text: str) -> bytes:
    out = b""
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + Z85_ALPHABET.index(ch)
        out += value.to_bytes(4, "big")
    return out


def test_z85_matches_the_specification_example() -> None:
    # ZeroMQ RFC 32 test vector.
    assert z85_encode(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"


def test_z85_refuses_partial_groups() -> None:
    with pytest.raises(ValueError):
        z85_encode(b"abc")


def test_the_curve_cert_is_derived_from_the_uid() -> None:
    uid = "5f0c1e0a-1111-2222-3333-444455556666"
    cert = flux_curve_cert("job", uid)
    assert cert == flux_curve_cert("job", uid)
    assert cert != flux_curve_cert("job", "another-uid")
    lines = dict(line.strip().split(" = ", 1) for line in cert.splitlines() if " = " in line)
    assert lines["name"] == '"job"'
    secret = z85_decode(lines["secret-key"].strip('"'))
    public = z85_decode(lines["public-key"].strip('"'))
    assert secret == hashlib.sha256(uid.encode()).digest()
    derived = X25519PrivateKey.from_private_bytes(secret).public_key()
    assert public == derived.public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert len(lines["secret-key"].strip('"')) == len(lines["public-key"].strip('"')) == 40
    assert "\ncurve\n" in cert and cert.startswith("#")


@pytest.mark.parametrize(
    ("size", "text"), [(1, "0"), (2, "0-1"), (8, "0-7")], ids=["one", "two", "eight"]
)
def test_flux_range(size: int, text: str) -> None:
    assert flux_range(size) == text


def test_hostlist_names_the_first_replica_of_the_node_job() -> None:
    assert flux_hostlist("lammps", 4) == "lammps-node-0-[0-3]"
    assert flux_hostlist("lammps", 1) == "lammps-node-0-[0]"


def test_broker_settings_take_the_runtime_env_then_the_trainjob_env() -> None:
    runtime_env = [{"name": "FLUX_NETWORK_DEVICE", "value": "ib0"}, {"name": "OTHER", "value": "x"}]
    trainer_env = [
        {"name": "FLUX_NETWORK_DEVICE", "value": "eth1"},
        {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
    ]
    assert flux_broker_settings(runtime_env, trainer_env) == {
        "FLUX_VIEW_IMAGE": FLUX_BROKER_DEFAULTS["FLUX_VIEW_IMAGE"],
        "FLUX_NETWORK_DEVICE": "eth1",
        "FLUX_QUEUE_POLICY": "easy",
    }
    assert flux_broker_settings(None, None) == dict(FLUX_BROKER_DEFAULTS)


def test_init_script_carries_hosts_and_broker_settings() -> None:
    settings = flux_broker_settings([], [{"name": "FLUX_QUEUE_POLICY", "value": "easy"}])
    script = flux_init_script(trainjob_name="job", namespace="team", nodes=2, settings=settings)
    assert "job-node-0-[0-1]" in script
    assert 'default_bind = "tcp://eth0:%p"' in script
    assert 'default_connect = "tcp://%h.job.team.svc.cluster.local:%p"' in script
    assert 'queue-policy = "easy"' in script


@pytest.mark.parametrize(
    ("nodes", "procs", "gpus", "flags", "resources"),
    [(2, 4, 0, "-N 2 -n 8", "--cores=0-3"), (3, 1, 2, "-N 3 -n 3 -g 2", "--cores=0 --gpu=0-1")],
    ids=["CPU only", "with GPUs"],
)
def test_entrypoint_flags_and_resources(
    nodes: int, procs: int, gpus: int, flags: str, resources: str
) -> None:
    script = flux_entrypoint_script(
        trainjob_name="job", nodes=nodes, procs_per_node=procs, gpus=gpus
    )
    assert f"flux run {flags} ${{command}}" in script
    assert resources in script
    assert '"job-node-0-0"' in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_both_scripts_are_valid_bash(tmp_path: Path) -> None:
    settings = flux_broker_settings([], [])
    scripts = {
        "init.sh": flux_init_script(
            trainjob_name="job", namespace="ns", nodes=2, settings=settings
        ),
        "entrypoint.sh": flux_entrypoint_script(
            trainjob_name="job", nodes=2, procs_per_node=2, gpus=1
        ),
    }
    for name, text in scripts.items():
        path = tmp_path / name
        path.write_text(text)
        subprocess.run(["bash", "-n", str(path)], check=True)
