"""Builders and runners shared by the sandbox tests (real processes, no mocks)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.sandbox import (
    PodResult,
    PodSandbox,
    SandboxContext,
    sandbox_mode,
)

BWRAP_OK = sandbox_mode().mode == "bwrap"
needs_bwrap = pytest.mark.skipif(not BWRAP_OK, reason=f"bwrap unusable: {sandbox_mode().reason}")

# Every behaviour that both modes promise is tested in both.
MODES = [
    pytest.param("bwrap", id="in bwrap", marks=needs_bwrap),
    pytest.param("plain", id="as plain processes"),
]


def make_pod(
    name: str = "p",
    *,
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod in Kubernetes JSON shape, as the executor creates it."""
    body: dict[str, Any] = {"restartPolicy": "Never", "containers": containers, **spec}
    if init:
        body["initContainers"] = init
    if volumes:
        body["volumes"] = volumes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": f"uid-{name}",
            "labels": labels or {}, "annotations": annotations or {},
        },
        "spec": body,
    }  # fmt: skip


def sh(script: str, name: str = "main", **extra: Any) -> dict[str, Any]:
    """A container running a bash script."""
    return {"name": name, "image": "busybox", "command": ["bash", "-c", script], **extra}


def make_ctx(root: Path, mode: str | None = None, pod: str = "p", **kw: Any) -> SandboxContext:
    return SandboxContext(
        pod_dir=root / "pods" / pod,
        log_dir=root / "logs",
        pod_ip=kw.pop("pod_ip", "127.0.0.2"),
        mode=mode,  # type: ignore[arg-type]
        **kw,
    )


async def run(
    pod: dict[str, Any], ctx: SandboxContext, **kw: Any
) -> tuple[PodResult, dict[str, str]]:
    """Run the pod to the end; its result and each container's log text."""
    sandbox = PodSandbox(pod, ctx)
    result = await sandbox.run(**kw)
    logs = {p.name: p.log_path.read_text() for p in sandbox.processes.values()}
    return result, logs


def live_pids_with(marker: str) -> list[int]:
    """Processes whose command line contains ``marker``: the orphan check."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            pids.append(int(entry))
    return pids
