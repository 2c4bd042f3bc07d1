"""This machine as a Node: allocatable cpu, memory and GPUs, and the Node object.

Defaults come from the machine (cpus, MemTotal, ``nvidia-smi -L``); ``<home>/node.yaml``
overrides any of them::

    allocatable:
      cpu: "6"
      memory: 16Gi
      nvidia.com/gpu: 0
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubetrain.api.quantity import parse_quantity

from .scheduling import GPU, Resources, resources_of

__all__ = ["NODE_FILE", "load_allocatable", "machine_allocatable", "node_object"]

NODE_FILE = "node.yaml"


def _gpu_count() -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def _memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def machine_allocatable() -> Resources:
    return Resources((os.cpu_count() or 1) * 1000, _memory(), _gpu_count())


def load_allocatable(home: Path) -> Resources:
    """The machine's resources with ``<home>/node.yaml``'s overrides. Raises ValueError
    naming the file and field when the file is malformed."""
    path = home / NODE_FILE
    machine = machine_allocatable()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return machine
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: {err}") from err
    overrides = data.get("allocatable") if isinstance(data, Mapping) else None
    if overrides is None:
        return machine
    if not isinstance(overrides, Mapping):
        raise ValueError(f"{path}: allocatable: expected a mapping of cpu, memory, {GPU}")
    for key, value in overrides.items():
        if key not in ("cpu", "memory", GPU):
            raise ValueError(f"{path}: allocatable.{key}: unknown resource (cpu, memory, {GPU})")
        try:
            parse_quantity(value)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: allocatable.{key}: {value!r} is not a quantity") from err
    given = resources_of(overrides)
    return Resources(
        given.cpu_millis if "cpu" in overrides else machine.cpu_millis,
        given.memory if "memory" in overrides else machine.memory,
        given.gpus if GPU in overrides else machine.gpus,
    )


def node_object(name: str, allocatable: Resources) -> dict[str, Any]:
    """The Node as a kubelet registers it (capacity = allocatable: nothing is reserved)."""
    resources = allocatable.as_quantities()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }
