"""Images map to local Python environments; pod names map to loopback addresses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubetrain.local.sandbox import (
    ImageMap,
    SandboxError,
    hosts_file,
    jobset_hosts,
    load_image_map,
    loopback_address,
)

MAPPING = """
default: {prefix: /opt/envs/default}
images:
  pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime: {prefix: /opt/envs/exact}
  "pytorch/pytorch:*": {prefix: /opt/envs/torch, workdir: /workspace}
  "ghcr.io/kubeflow/trainer/deepspeed-runtime:*":
    prefix: ~/envs/ds
    users: {1000: [mpiuser, /home/mpiuser]}
"""


@pytest.mark.parametrize(
    ("image", "prefix"),
    [
        pytest.param("pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime", "/opt/envs/exact", id="an exact reference wins"),
        pytest.param("pytorch/pytorch:2.10.0", "/opt/envs/torch", id="a pattern matches other tags"),
        pytest.param("ubuntu:jammy", "/opt/envs/default", id="anything else runs in the default"),
        pytest.param(None, "/opt/envs/default", id="a container without image runs in the default"),
    ],
)  # fmt: skip
def test_image_lookup(tmp_path: Path, image: str | None, prefix: str) -> None:
    (tmp_path / "images.yaml").write_text(MAPPING)
    assert str(load_image_map(tmp_path / "images.yaml").resolve(image).prefix) == prefix


def test_a_mapping_file_carries_workdir_and_users(tmp_path: Path) -> None:
    (tmp_path / "images.yaml").write_text(MAPPING)
    images = load_image_map(tmp_path / "images.yaml")
    ds = images.resolve("ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0")
    assert ds.users == {1000: ("mpiuser", "/home/mpiuser")}
    assert str(ds.prefix) == str(Path("~/envs/ds").expanduser())
    assert images.resolve("pytorch/pytorch:x").workdir == "/workspace"


def test_no_mapping_file_means_the_current_environment(tmp_path: Path) -> None:
    assert load_image_map(tmp_path / "absent.yaml") == ImageMap()


def test_an_entry_without_prefix_is_refused(tmp_path: Path) -> None:
    (tmp_path / "images.yaml").write_text("images: {x: {workdir: /}}")
    with pytest.raises(SandboxError, match="needs a 'prefix'"):
        load_image_map(tmp_path / "images.yaml")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param("images: [x]", "images", id="images as a list"),
        pytest.param("images: {x: {prefix: /p, env: [A]}}", "images['x'].env", id="env as a list"),
        pytest.param("default: {prefix: /p, users: root}", "default.users", id="users as a string"),
    ],
)
def test_a_mapping_field_of_another_type_is_refused_naming_it(
    tmp_path: Path, text: str, field: str
) -> None:
    (tmp_path / "images.yaml").write_text(text)
    with pytest.raises(SandboxError, match=re.escape(f"{field}: expected a mapping")):
        load_image_map(tmp_path / "images.yaml")


@pytest.mark.parametrize(
    ("index", "address"),
    [(0, "127.0.0.2"), (252, "127.0.0.254"), (253, "127.0.1.1"), (506, "127.0.1.254"), (507, "127.0.2.1")],
    ids=["the first pod", "the last of the first block", "the next block skips .0",
         "the second block's last", "the third block"],
)  # fmt: skip
def test_loopback_addresses_skip_network_and_broadcast_bytes(index: int, address: str) -> None:
    assert loopback_address(index) == address


def test_a_jobsets_hosts_file_names_every_pod_in_every_form() -> None:
    hosts = jobset_hosts(
        [("tj-node-0-0", "tj", "ns", "127.0.0.2"), ("tj-node-0-1", "tj", "ns", "127.0.0.3")]
    )
    text = hosts_file(hosts)
    assert (
        "127.0.0.2\ttj-node-0-0.tj.ns.svc.cluster.local tj-node-0-0.tj.ns.svc tj-node-0-0.tj.ns"
        " tj-node-0-0.tj tj-node-0-0" in text
    )
    assert "127.0.0.3\ttj-node-0-1.tj.ns.svc.cluster.local" in text
    assert text.startswith("# ") and "127.0.0.1\tlocalhost" in text
