"""What the executor can be told: where it lives and how patient it is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.local.sandbox import ImageMap, SandboxMode

from .decision import Settings
from .podrunner import RunnerSettings

__all__ = ["UNSIGNED_TOKEN", "ExecutorSettings", "TokenProvider"]

# pod, audience → token text for projected serviceAccountToken volumes.
TokenProvider = Callable[[dict[str, Any], str], Awaitable[str]]

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
