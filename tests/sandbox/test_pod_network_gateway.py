"""The pod network's gateway keeps its MAC while pods come and go.

A Linux bridge whose address was never set takes the lowest MAC of its ports and changes it when
that port goes. Every other pod still holds the old MAC for its gateway in its ARP cache and
loses its egress (the host's loopback, the S3 server an initializer reads) until the entry
expires, about half a minute: an initializer beside one that had just finished timed out so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kubetrain.local.sandbox import PodNetwork, network_probe


def _addresses(net: PodNetwork) -> dict[str, str]:
    """MAC by interface in the namespace that holds the bridge."""
    argv = [*net.enter_pod(net.holder.pid), "ip", "-j", "link"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=True).stdout
    return {link["ifname"]: link.get("address", "") for link in json.loads(out)}


def test_the_gateway_keeps_its_mac_when_the_pod_it_could_have_taken_it_from_goes(
    tmp_path: Path,
) -> None:
    probe = network_probe()
    if not probe.available:
        pytest.skip(f"no pod network here: {probe.reason}")
    from kubetrain.local.sandbox.network import BRIDGE

    net = PodNetwork.open(tmp_path / "net")
    pods = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    try:
        gateway = _addresses(net)[BRIDGE]
        for index, pod in enumerate(pods):
            net.attach(pod, f"10.88.0.{index + 2}")
        links = _addresses(net)
        veths = {name: mac for name, mac in links.items() if name.startswith("kv")}
        assert len(veths) == 3
        assert links[BRIDGE] == gateway
        # Pods go one after another: whichever had the lowest MAC, the gateway's stays.
        for pod in pods:
            PodNetwork.detach(pod)
            assert _addresses(net)[BRIDGE] == gateway
    finally:
        for pod in pods:
            PodNetwork.detach(pod)
        net.close()
