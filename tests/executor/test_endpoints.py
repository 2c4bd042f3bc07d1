"""Which pods a Service's name resolves to."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.executor.endpoints import service_endpoints


def _pod(
    ip: str,
    labels: dict[str, str],
    *,
    ready: bool = True,
    ns: str = "default",
    phase: str = "Running",
) -> dict[str, Any]:
    return {
        "metadata": {"name": ip, "namespace": ns, "labels": labels},
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": str(ready)}],
        },
    }


PODS = [
    _pod("10.88.0.3", {"app": "cache"}),
    _pod("10.88.0.2", {"app": "cache", "tier": "a"}),
    _pod("10.88.0.4", {"app": "cache"}, ready=False),
    _pod("10.88.0.5", {"app": "cache"}, ns="other"),
    _pod("10.88.0.6", {"app": "cache"}, phase="Succeeded", ready=False),
    _pod("10.88.0.7", {"app": "web"}),
]


@pytest.mark.parametrize(
    ("spec", "ips"),
    [
        pytest.param({"selector": {"app": "cache"}}, ["10.88.0.2", "10.88.0.3"], id="ready pods of its namespace that match, sorted"),
        pytest.param({"selector": {"app": "cache", "tier": "a"}}, ["10.88.0.2"], id="every selector label must match"),
        pytest.param({"selector": {"app": "cache"}, "publishNotReadyAddresses": True}, ["10.88.0.2", "10.88.0.3", "10.88.0.4"], id="publishNotReadyAddresses adds running pods not ready yet"),
        pytest.param({}, [], id="no selector: no endpoints are managed"),
    ],
)  # fmt: skip
def test_a_service_resolves_to_its_ready_endpoints(spec: dict[str, Any], ips: list[str]) -> None:
    service = {"metadata": {"name": "cache", "namespace": "default"}, "spec": spec}
    assert service_endpoints(service, PODS) == ips
