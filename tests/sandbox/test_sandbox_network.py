"""The pod network's pure parts: pod addresses and the pod's resolv.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.local.sandbox import bridge_address
from kubetrain.local.sandbox.network import pod_resolv_conf


@pytest.mark.parametrize(
    ("index", "address"),
    [
        pytest.param(0, "10.88.0.2", id="the first pod comes after the bridge's 10.88.0.1"),
        pytest.param(252, "10.88.0.254", id="the last of the first /24"),
        pytest.param(253, "10.88.1.1", id="x.255 and x.0 are skipped"),
    ],
)  # fmt: skip
def test_pod_addresses_fill_the_bridge_subnet(index: int, address: str) -> None:
    assert bridge_address(index) == address


@pytest.mark.parametrize(
    ("host", "pod"),
    [
        pytest.param("nameserver 10.1.2.3\nsearch corp\n", "nameserver 10.1.2.3\nsearch corp\n", id="a reachable nameserver stays"),
        pytest.param("nameserver 127.0.0.53\noptions edns0\n", "nameserver 10.0.2.3\noptions edns0\n", id="the host's loopback resolver is reached through slirp4netns"),
        pytest.param("nameserver 127.0.0.1\nnameserver ::1\nnameserver 9.9.9.9\n", "nameserver 10.0.2.3\nnameserver 9.9.9.9\n", id="loopback resolvers become one forwarder"),
        pytest.param("", "nameserver 10.0.2.3\n", id="no resolv.conf: the forwarder"),
    ],
)  # fmt: skip
def test_the_pods_resolv_conf_reaches_the_hosts_resolvers(
    tmp_path: Path, host: str, pod: str
) -> None:
    (tmp_path / "resolv.conf").write_text(host)
    assert pod_resolv_conf(str(tmp_path / "resolv.conf")) == pod
