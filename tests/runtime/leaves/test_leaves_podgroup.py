"""Pod requests and PodGroup totals (reference §5) with Kubernetes' quantity formatting."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.runtime.podgroup import (
    cpu_count,
    gpu_count,
    parse_quantity,
    pod_group_totals,
    pod_requests,
)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("1.5", "1500m"),
        ("1500m", "1500m"),
        ("2000m", "2"),
        ("0.5Gi", "512Mi"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("1023Ki", "1023Ki"),
        ("1000", "1k"),
        ("100M", "100M"),
        ("0.1m", "100u"),
        ("1.0000000001", "1000000001n"),
        ("1e3", "1e3"),
        ("12e-1", "1200e-3"),
        ("512", "512"),
        (2, "2"),
        (2.0, "2"),
        (0.5, "500m"),
        ("0", "0"),
        ("0Gi", "0"),
    ],
    ids=lambda v: repr(v),
)
def test_quantities_print_in_kubernetes_canonical_form(raw: Any, canonical: str) -> None:
    assert parse_quantity(raw).canonical() == canonical


@pytest.mark.parametrize("raw", ["", "1.5.5", "1Z", "Gi", "1 Gi", True, None, [1]], ids=repr)
def test_invalid_quantities_are_rejected(raw: Any) -> None:
    with pytest.raises(ValueError):
        parse_quantity(raw)


def test_a_sum_keeps_the_format_of_the_first_non_zero_term() -> None:
    assert (parse_quantity("1Gi") + parse_quantity("1Gi")).canonical() == "2Gi"
    assert (parse_quantity("1G") + parse_quantity("1Gi")).canonical() == "2073741824"
    assert (parse_quantity("0") + parse_quantity("1Gi")).canonical() == "1Gi"


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
        "a limit stands in for a missing request",
        {"containers": [c({"cpu": "1"}, {"cpu": "2", "nvidia.com/gpu": 4})]},
        {"cpu": "1", "nvidia.com/gpu": "4"},
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
    ("a pod without resources requests nothing", {"containers": [{"name": "c"}]}, {}),
]


@pytest.mark.parametrize(
    ("pod", "expected"), [x[1:] for x in POD_CASES], ids=[x[0] for x in POD_CASES]
)
def test_pod_requests(pod: dict[str, Any], expected: dict[str, str]) -> None:
    assert {k: v.canonical() for k, v in pod_requests(pod).items()} == expected


def test_pod_group_totals_sum_every_pod_set_with_mixed_units() -> None:
    initializer = {"containers": [c({"cpu": "500m", "memory": "512Mi"})]}
    node = {"containers": [c({"cpu": 2, "memory": "1.5Gi"}, {"nvidia.com/gpu": "1"})]}
    launcher = {"containers": [c({"cpu": "0.25", "memory": "1G"})]}
    members, resources = pod_group_totals([(1, initializer), (4, node), (1, launcher)])
    assert members == 6
    # cpu 0.5 + 8 + 0.25; memory 536870912 + 4 x 1610612736 + 1e9 = 7979321856, which is no
    # whole number of Ki, so the binary format (the first term's) prints it plainly
    assert resources == {"cpu": "8750m", "memory": "7979321856", "nvidia.com/gpu": "4"}
    assert list(resources) == sorted(resources)


def test_pod_group_totals_of_nothing() -> None:
    assert pod_group_totals([]) == (0, {})


@pytest.mark.parametrize(
    ("resources", "gpus", "cpus"),
    [
        (None, 0, 0),
        ({"limits": {"nvidia.com/gpu": "2"}}, 2, 0),
        ({"requests": {"amd.com/GPU": 1}, "limits": {"nvidia.com/gpu": 8}}, 1, 0),
        ({"requests": {"cpu": "500m"}}, 0, 1),
        ({"requests": {"cpu": "0"}, "limits": {"cpu": "3"}}, 0, 3),
        ({"limits": {"cpu": 2.5}}, 0, 3),
    ],
    ids=[
        "nothing set",
        "GPUs from limits",
        "requests are looked at before limits, any case",
        "CPU rounds up",
        "a zero CPU request falls back to the limit",
        "a float CPU limit rounds up",
    ],
)
def test_device_counts(resources: Any, gpus: int, cpus: int) -> None:
    assert gpu_count(resources) == gpus
    assert cpu_count(resources) == cpus
