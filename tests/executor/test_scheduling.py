"""The node's resource fit: which pods start, which wait, and what the scheduler says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.executor.node import NODE_FILE, load_allocatable, machine_allocatable
from kubetrain.local.executor.scheduling import (
    Resources,
    assign_gpus,
    insufficient,
    pod_requests,
    unschedulable_message,
)

GiB = 1024**3


def _pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = init
    return {"spec": spec}


def _c(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **kw}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(_pod(_c()), Resources(), id="a pod without resources requests nothing"),
        pytest.param(_pod(_c({"cpu": "500m", "memory": "1Gi"}), _c({"cpu": "1"})),
                     Resources(1500, GiB), id="containers add up"),
        pytest.param(_pod(_c(limits={"cpu": "2", "memory": "64Mi", "nvidia.com/gpu": 1})),
                     Resources(2000, 64 * 1024**2, 1), id="a limit stands in for a missing request"),
        pytest.param(_pod(_c({"cpu": "1"}), init=[_c({"cpu": "3"})]),
                     Resources(3000), id="a bigger init container sets the pod's request"),
        pytest.param(_pod(_c({"cpu": "1"}), init=[_c({"cpu": "500m"}, restartPolicy="Always")]),
                     Resources(1500), id="a sidecar adds to the containers"),
    ],
)  # fmt: skip
def test_a_pods_request_is_what_kube_scheduler_counts(
    pod: dict[str, Any], expected: Resources
) -> None:
    assert pod_requests(pod) == expected


NODE = Resources(cpu_millis=2000, memory=4 * GiB, gpus=2)


@pytest.mark.parametrize(
    ("request_", "used", "lacking"),
    [
        pytest.param(Resources(1000, GiB), Resources(1000, GiB), [], id="a pod that fits beside the others starts"),
        pytest.param(Resources(1500), Resources(1000), ["cpu"], id="too little cpu left"),
        pytest.param(Resources(500, 3 * GiB, 1), Resources(1000, 2 * GiB, 2), ["memory", "nvidia.com/gpu"],
                     id="every resource that lacks is named, in the scheduler's order"),
        pytest.param(Resources(), Resources(5000, 9 * GiB, 3), [], id="a pod that requests nothing always fits"),
        pytest.param(Resources(3000), Resources(), ["cpu"], id="a pod bigger than the node never fits"),
    ],
)  # fmt: skip
def test_the_fit_names_what_the_node_lacks(
    request_: Resources, used: Resources, lacking: list[str]
) -> None:
    assert insufficient(request_, NODE, used) == lacking


def test_the_message_is_kube_schedulers() -> None:
    assert unschedulable_message(["cpu", "memory"]) == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


@pytest.mark.parametrize(
    ("count", "taken", "expected"),
    [
        pytest.param(1, [], (0,), id="the lowest free device"),
        pytest.param(2, [1], (0, 2), id="whole devices around the taken ones"),
        pytest.param(2, [0, 1], None, id="never shared: too few free devices is no assignment"),
    ],
)  # fmt: skip
def test_gpus_are_assigned_as_whole_devices(
    count: int, taken: list[int], expected: tuple[int, ...] | None
) -> None:
    assert assign_gpus(count, 3, taken) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("allocatable: {cpu: lots}", "allocatable.cpu: 'lots' is not a quantity", id="a bad quantity names its field"),
        pytest.param("allocatable: {disk: 1Gi}", "allocatable.disk: unknown resource", id="an unknown resource is refused"),
        pytest.param("allocatable: [cpu]", "allocatable: expected a mapping", id="allocatable must be a mapping"),
    ],
)  # fmt: skip
def test_a_bad_node_file_is_an_error_naming_the_file_and_field(
    tmp_path: Path, text: str, error: str
) -> None:
    (tmp_path / NODE_FILE).write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / NODE_FILE}: {error}")):
        load_allocatable(tmp_path)


def test_the_node_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    (tmp_path / NODE_FILE).write_text("allocatable:\n  cpu: '64'\n  nvidia.com/gpu: 0\n")
    node = load_allocatable(tmp_path)
    assert (node.cpu_millis, node.gpus) == (64000, 0)
    assert node.memory == machine_allocatable().memory
