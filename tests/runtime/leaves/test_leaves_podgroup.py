"""Pod requests and PodGroup totals (trainer v2.3.0 pkg/runtime/framework/plugins/coscheduling/) with Kubernetes' quantity formatting."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.quantity import parse_quantity
from kubetrain.runtime.podgroup import (
    add_quantities,
    pod_group_totals,
    pod_requests,
    scale_quantity,
)


def test_a_sum_keeps_the_format_of_the_first_non_zero_term() -> None:
    gi, g, zero = parse_quantity("1Gi"), parse_quantity("1G"), parse_quantity("0")
    assert str(add_quantities(gi, gi)) == "2Gi"
    assert str(add_quantities(g, gi)) == "2073741824"
    assert str(add_quantities(zero, gi)) == "1Gi"
    assert str(scale_quantity(parse_quantity("1.5"), 3)) == "4500m"
    assert str(scale_quantity(parse_quantity("512Mi"), 4)) == "2Gi"


def c(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


POD_CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    (
        "containers add up",
        {"containers": [c({"cpu": "500m"}), c({"cpu": 1, "memory": "1Gi"})]},
        {"cpu": "1500m", "memory": "1Gi"},
    ),
    (
        "a resource that is only limited is not requested (templates are never defaulted)",
        {"containers": [c({"cpu": "1"}, {"cpu": "2", "nvidia.com/gpu": 4})]},
        {"cpu": "1"},
    ),
    (
        "a bigger init container wins per resource",
        {"containers": [c({"cpu": "1", "memory": "1Gi"})], "initContainers": [c({"cpu": "3"})]},
        {"cpu": "3", "memory": "1Gi"},
    ),
    (
        "a sidecar adds to the containers and to later init containers",
        {
            "containers": [c({"cpu": "1"})],
            "initContainers": [c({"cpu": "500m"}, restartPolicy="Always"), c({"cpu": "2"})],
        },
        {"cpu": "2500m"},
    ),
    (
        "overhead comes on top",
        {"containers": [c({"cpu": "1"})], "overhead": {"cpu": "250m"}},
        {"cpu": "1250m"},
    ),
    (
        "pod-level requests replace the containers' cpu and memory",
        {
            "containers": [c({"cpu": "1", "memory": "1Gi", "example.com/nic": 1})],
            "resources": {"requests": {"cpu": "3", "memory": "2Gi"}},
        },
        {"cpu": "3", "memory": "2Gi", "example.com/nic": "1"},
    ),
    ("a pod without resources requests nothing", {"containers": [{"name": "c"}]}, {}),
]


@pytest.mark.parametrize(
    ("pod", "expected"), [x[1:] for x in POD_CASES], ids=[x[0] for x in POD_CASES]
)
def test_pod_requests(pod: dict[str, Any], expected: dict[str, str]) -> None:
    assert {k: str(v) for k, v in pod_requests(pod).items()} == expected


def test_pod_group_totals_sum_every_pod_set_with_mixed_units() -> None:
    initializer = {"containers": [c({"cpu": "500m", "memory": "512Mi"})]}
    node = {"containers": [c({"cpu": 2, "memory": "1.5Gi", "nvidia.com/gpu": "1"})]}
    launcher = {"containers": [c({"cpu": "0.25", "memory": "1G"})]}
    members, resources = pod_group_totals([(1, initializer), (4, node), (1, launcher)])
    assert members == 6
    # cpu 0.5 + 8 + 0.25; memory 536870912 + 4 x 1610612736 + 1e9 = 7979321856, which is no
    # whole number of Ki, so the binary format (the first term's) prints it plainly
    assert resources == {"cpu": "8750m", "memory": "7979321856", "nvidia.com/gpu": "4"}
    assert list(resources) == sorted(resources)


def test_pod_group_totals_of_nothing() -> None:
    assert pod_group_totals([]) == (0, {})


def test_limits_can_stand_in_for_requests_when_asked() -> None:
    pod = {"containers": [c({"cpu": "1"}, {"cpu": "2", "nvidia.com/gpu": 4})]}
    requests = pod_requests(pod, limits_as_requests=True)
    assert {k: str(v) for k, v in requests.items()} == {"cpu": "1", "nvidia.com/gpu": "4"}
