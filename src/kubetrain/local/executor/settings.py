"""What the executor can be told: where it lives and how patient it is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.local.sandbox import ImageMap, OverlayHook, SandboxMode

from .decision import Settings
from .jobs import REFUSED_REASON
from .podrunner import FinalFailure, RunnerSettings
from .scheduling import Resources

__all__ = ["REFUSED_REASON", "UNSIGNED_TOKEN", "ExecutorSettings", "Refusal", "TokenProvider"]

# pod, audience → token text for projected serviceAccountToken volumes.
TokenProvider = Callable[[dict[str, Any], str], Awaitable[str]]

# pod, sandbox mode, why that mode → why the pod cannot run on this machine (None: it can).
Refusal = Callable[[Mapping[str, Any], str, str], str | None]

# Stands in for projected service-account tokens until a real issuer is plugged in
# (ExecutorSettings.token_provider; the TrainJobStatus feature needs one).
UNSIGNED_TOKEN = "kubetrain-local-unsigned-token"


@dataclass(frozen=True)
class ExecutorSettings:
    home: Path
    node_name: str = "kubetrain"
    logic: Settings = field(default_factory=Settings)
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    # terminationGracePeriodSeconds is capped here so a deleted job's processes are gone
    # within a few seconds, as `kubetrain delete` promises.
    max_grace_s: float = 3.0
    images: ImageMap = field(default_factory=ImageMap)
    sandbox_mode: SandboxMode | None = None
    token_provider: TokenProvider | None = None
    # Names every pod's /etc/hosts also maps (the status server's Service names, ...).
    extra_hosts: Mapping[str, str] = field(default_factory=dict)
    # Files and env added to each container (the frameworks' sshd/JAX support).
    overlay: OverlayHook | None = None
    # Each pod its own network namespace and IP where this machine allows it
    # (`kubetrain.local.sandbox.network`); False: pods share the host's network and ports.
    pod_network: bool = True
    # Containers' resources.limits (memory, cpu) enforced with cgroups where writable.
    enforce_limits: bool = True
    # The node's allocatable cpu, memory and GPUs (None: the machine's, see `node`).
    allocatable: Resources | None = None
    # The API server pods reach as kubernetes.default.svc: its port and CA (None: pods get
    # no service-account mount, see `apiaccess`).
    api_port: int | None = None
    api_ca_pem: bytes | None = None
    # Asked before a pod starts: pods that cannot run here fail at once with its message.
    refusal: Refusal | None = None
    # Asked when a pod has failed: True fails its Job at once with the pod's termination
    # message instead of starting a replacement after a back-off.
    final_failure: FinalFailure | None = None
