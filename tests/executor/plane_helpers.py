"""Helpers for end-to-end executor tests: JobSet builders, waiting, finding processes."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import EVENT, JOBSET, POD
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.executor.jobset_logic import Settings
from kubetrain.local.executor.loop import Executor
from kubetrain.local.executor.podrunner import RunnerSettings
from kubetrain.local.executor.settings import ExecutorSettings
from kubetrain.local.executor.streams import PodStreams
from polling import until


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker`` (how tests find a pod's processes)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            out.append(int(entry))
    return out


def make_jobset(
    name: str,
    command: list[str],
    *,
    pods: int = 2,
    restart_policy: str = "Never",
    backoff_limit: int = 0,
    rjob: str = "node",
    extra_rjobs: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                *(extra_rjobs or []),
                replicated_job(
                    rjob,
                    command,
                    pods=pods,
                    restart_policy=restart_policy,
                    backoff_limit=backoff_limit,
                ),
            ],
            **spec,
        },
    }


def replicated_job(
    name: str,
    command: list[str],
    *,
    pods: int = 1,
    restart_policy: str = "Never",
    backoff_limit: int = 0,
    depends_on: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "replicas": 1,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": backoff_limit,
                "template": {
                    "spec": {
                        "restartPolicy": restart_policy,
                        "terminationGracePeriodSeconds": 30,
                        "containers": [{"name": name, "image": "python:3.11", "command": command}],
                    }
                },
            }
        },
    }
    if depends_on:
        out["dependsOn"] = depends_on
    return out


@dataclass
class Plane:
    api: KubeClient
    home: Path
    executor: Executor
    server: ApiServer

    async def wait_for(self, what: Callable[[], Awaitable[Any]], timeout: float = 20.0) -> Any:
        return await until(what, timeout, every=0.05)

    async def jobset(self, name: str) -> dict[str, Any]:
        return await self.api.get(JOBSET.api_version, JOBSET.plural, name, namespace="default")

    async def terminal(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        async def done() -> dict[str, Any] | None:
            js = await self.jobset(name)
            conds = (js.get("status") or {}).get("conditions") or []
            if any(c["status"] == "True" and c["type"] in ("Completed", "Failed") for c in conds):
                return js
            return None

        result: dict[str, Any] = await self.wait_for(done, timeout)
        return result

    async def unschedulable(self, jobset: str) -> dict[str, Any] | None:
        """The ``PodScheduled: False`` condition of the JobSet's first pod, once it has one."""
        pods = await self.pods(jobset)
        for cond in (pods[0]["status"].get("conditions") or []) if pods else []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return dict(cond)
        return None

    async def pods(self, jobset: str) -> list[dict[str, Any]]:
        items, _ = await self.api.list(
            POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={jobset}"
        )
        return sorted(items, key=lambda p: p["metadata"]["name"])

    async def events(self) -> list[dict[str, Any]]:
        items, _ = await self.api.list(EVENT.api_version, EVENT.plural)
        return items


def marker() -> str:
    return f"kt-{uuid.uuid4().hex[:12]}"


PY = sys.executable


def fast_settings(home: Path, **overrides: Any) -> ExecutorSettings:
    """Executor settings for tests: no back-off after a pod failure, crash back-offs and grace
    periods of a fraction of a second or two."""
    return ExecutorSettings(
        home=home,
        logic=Settings(pod_failure_backoff_s=0),
        runner=RunnerSettings(crash_backoff_s=0.1, crash_backoff_cap_s=0.2, setup_retry_s=0.2),
        max_grace_s=2.0,
        **overrides,
    )


@asynccontextmanager
async def running_plane(
    home: Path, settings: ExecutorSettings, *, pod_streams: bool = False
) -> AsyncIterator[Plane]:
    """An embedded API server and a started executor on it; ``pod_streams``: the server also
    serves exec, attach, logs and port-forward from the executor's kubelet."""
    server = ApiServer(home, in_memory=True)
    await server.start()
    api = connect(server.write_kubeconfig())
    executor = Executor(api, settings)
    await executor.start()
    if pod_streams:
        server.serve_pod_streams(PodStreams(executor.kubelet))
    try:
        yield Plane(api, home, executor, server)
    finally:
        await executor.stop(kill_pods=True)
        await api.close()
        await server.close()
