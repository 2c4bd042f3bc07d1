"""A JobSet played out with sandboxes alone: render → pods → PodSandbox per pod.

This is the local engine minus the API server: the TrainJob is rendered by the real runtime,
pods are built by the executor's own `build_pod`, and each runs in a real bubblewrap sandbox
with `kubetrain.local.frameworks.pod_overlay` applied the way the sandbox is to apply it
(`OverlaySandbox.launch`). JobSet semantics are reduced to what these tests need: the job
succeeds when its success targets (the launcher for MPI, else every pod) succeed, and the
first failed pod ends the whole set, as the default failure policy does.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import os
import random
import re
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.executor.podbuild import build_pod
from kubetrain.local.executor.ports import WILDCARD, PortGate, declared_ports, port_is_free
from kubetrain.local.executor.spec import read_spec
from kubetrain.local.frameworks import local_refusal, pod_overlay, with_framework_images
from kubetrain.local.sandbox import (
    ImageMap,
    PodResult,
    PodSandbox,
    SandboxContext,
    jobset_hosts,
    loopback_address,
)
from kubetrain.local.sandbox.launch import Launch, find_container
from kubetrain.local.sandbox.volumes import Mount
from kubetrain.runtime import Environment, render
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.sshkeys import generate_ssh_keypair

__all__ = [
    "EXAMPLES",
    "HOST_PORT_29500",
    "Outcome",
    "OverlaySandbox",
    "default_runtime",
    "digests",
    "example_job",
    "plan_objects",
    "run_trainjob",
    "wait_wildcard_port",
]


# DeepSpeed's store binds 29500 on every address, and XGBoost's tracker listens on its pod
# address's 29500 without SO_REUSEADDR: the connections it closes stay in TIME-WAIT for 60 s,
# and those block that wildcard bind (torch's store would fail the same way). The tests that
# start either share this xdist group, so they never overlap; DeepSpeed's module sorts first,
# and its wait for the port covers any other order.
HOST_PORT_29500 = pytest.mark.xdist_group("host-port-29500")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_job(name: str) -> dict[str, Any]:
    """The TrainJob of ``examples/<name>``."""
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name / "trainjob.yaml").read_text())
    return data


def digests(text: str) -> set[str]:
    """The model digests the example scripts print: one per rank, all equal when the ranks
    trained one model together."""
    return set(re.findall(r"digest ([0-9a-f]{16})", text))


class OverlaySandbox(PodSandbox):
    """A PodSandbox with the framework overlay applied as the sandbox is to apply it."""

    def launch(self, container_name: str) -> Launch:
        launch = super().launch(container_name)
        assert self._volumes is not None
        overlay = pod_overlay(
            self.pod, find_container(self.pod, container_name), pod_ip=self.ctx.pod_ip,
            env=launch.env, volumes=self._volumes, work_dir=self.ctx.pod_dir / "frameworks",
        )  # fmt: skip
        launch.mounts.extend(Mount(src, target, True) for src, target in overlay.files)
        for name, value in overlay.env.items():
            launch.env.setdefault(name, value)
        return launch


class _AnyToken(dict[str, str]):
    """Every projected service-account token audience gets a dummy token."""

    def get(self, key: str, default: Any = None) -> str:
        return "token"


def default_runtime(name: str) -> dict[str, Any]:
    return next(r for r in default_runtimes() if r["metadata"]["name"] == name)


def plan_objects(
    trainjob: Mapping[str, Any], runtime: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The objects the controller would apply for ``trainjob``."""
    tj = copy.deepcopy(dict(trainjob))
    tj.setdefault("metadata", {}).setdefault("namespace", "default")
    rt = dict(runtime) if runtime is not None else default_runtime(tj["spec"]["runtimeRef"]["name"])
    env = Environment(ssh_keypair=generate_ssh_keypair)
    return list(render(tj, rt, environment=env).objects)


@dataclass
class Outcome:
    results: dict[str, PodResult]
    logs: dict[str, str]
    elapsed: float
    failed_first: str | None = None
    alive_after: list[str] = field(default_factory=list)

    def log(self, hostname_part: str) -> str:
        return "".join(v for k, v in self.logs.items() if hostname_part in k)


def _pods(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    jobset = next(o for o in objects if o["kind"] == "JobSet")
    jobset["metadata"]["uid"] = f"uid-{random.randrange(1 << 30)}"
    spec = read_spec(jobset)
    pods = []
    for rjob in spec.replicated_jobs:
        for j in range(rjob.replicas):
            for i in range(rjob.completions):
                pod = build_pod(spec, rjob, j, i, 0, "t", node_name="kubetrain-local")
                pod["spec"]["restartPolicy"] = "Never"
                pods.append(pod)
    return pods, spec


async def run_trainjob(
    trainjob: Mapping[str, Any],
    root: Path,
    *,
    runtime: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    during: Any = None,
    stop_on_failure: bool = True,
    serves: Iterable[int] = (),
) -> Outcome:
    """Run every pod of ``trainjob``'s JobSet in sandboxes until it succeeds or a pod fails.

    ``during(sandboxes)`` (async, optional) runs alongside, e.g. to kill a pod mid-way.
    ``stop_on_failure=False`` waits for the success targets even after another pod failed
    (to see whether the launcher itself notices). ``serves``: ports the job's processes
    listen on without declaring them (DeepSpeed's store on 29500).
    """
    objects = plan_objects(trainjob, runtime)
    config_maps = {
        o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"
    }
    secrets = {
        o["metadata"]["name"]: {k: base64.b64decode(v) for k, v in (o.get("data") or {}).items()}
        for o in objects
        if o["kind"] == "Secret"
    }
    pods, spec = _pods(objects)
    # A fresh block of addresses per run: a pod address reused within a minute could find
    # its port still in TIME_WAIT from the last run.
    base = random.randrange(20_000, 60_000)
    addresses = {p["spec"]["hostname"]: loopback_address(base + k) for k, p in enumerate(pods)}
    hosts = jobset_hosts([(h, spec.subdomain, spec.namespace, a) for h, a in addresses.items()])
    images = with_framework_images(ImageMap())
    sandboxes: dict[str, PodSandbox] = {}
    for pod in pods:
        host = pod["spec"]["hostname"]
        refusal = local_refusal(pod)
        assert refusal is None, refusal
        ctx = SandboxContext(
            pod_dir=root / "pods" / host, log_dir=root / "logs", pod_ip=addresses[host],
            hosts=hosts, config_maps=config_maps, secrets=secrets, tokens=_AnyToken(),
            images=images, die_with_parent=True,
        )  # fmt: skip
        sandboxes[host] = OverlaySandbox(pod, ctx)
    # Pods here share the host's ports, and no executor schedules them: hold the machine-wide
    # locks of the ports they declare (and serve), as the executor's PortGate does for its own
    # pods (another worker's job may hold them).
    ports = set(serves).union(*(declared_ports(p) for p in pods))
    gate = await asyncio.to_thread(_hold_ports, ports)
    try:
        return await _run_sandboxes(sandboxes, pods, spec, timeout, during, stop_on_failure)
    finally:
        gate.close()


def _hold_ports(ports: set[int], timeout: float = 90.0) -> PortGate:
    """A gate holding ``ports``' machine-wide locks once no job holds them and they can be
    bound on every address; fails the test after ``timeout`` seconds."""
    gate = PortGate()
    deadline = time.monotonic() + timeout
    while True:
        why = gate.blocked("frameworks-test", ports, WILDCARD)
        if why is None:
            return gate
        gate.close()
        assert time.monotonic() < deadline, why
        time.sleep(0.5)


async def _run_sandboxes(
    sandboxes: dict[str, PodSandbox],
    pods: list[dict[str, Any]],
    spec: Any,
    timeout: float,
    during: Any,
    stop_on_failure: bool,
) -> Outcome:
    targets = set(spec.success_targets) or {r.name for r in spec.replicated_jobs}
    target_hosts = {
        p["spec"]["hostname"]
        for p in pods
        if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] in targets
    }
    start = time.monotonic()
    tasks = {asyncio.create_task(sb.run()): host for host, sb in sandboxes.items()}
    helper = asyncio.create_task(during(sandboxes)) if during is not None else None
    failed_first: str | None = None
    pending = set(tasks)
    try:
        deadline = start + timeout
        while pending:
            done, pending = await asyncio.wait(
                pending, timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
            if not done:
                break
            bad = [tasks[t] for t in done if t.exception() is not None or not t.result().succeeded]
            if bad and failed_first is None:
                failed_first = bad[0]
            if bad and (stop_on_failure or set(bad) & target_hosts):
                break
            finished = {tasks[t] for t in tasks if t.done()}
            if target_hosts <= finished:
                break
    finally:
        await asyncio.gather(*(sb.terminate(2) for sb in sandboxes.values()))
        await asyncio.gather(*tasks, return_exceptions=True)
        if helper is not None:
            helper.cancel()
    elapsed = time.monotonic() - start
    logs = {}
    for host, sb in sandboxes.items():
        path = sb.log_dir / "node.log"
        logs[host] = path.read_text() if path.exists() else ""
    return Outcome(
        results={host: sb.result for host, sb in sandboxes.items()},
        logs=logs,
        elapsed=elapsed,
        failed_first=failed_first,
        alive_after=[host for host, sb in sandboxes.items() if sb.is_alive()],
    )


def wait_wildcard_port(port: int, timeout: float = 65.0) -> bool:
    """Wait until ``port`` can be bound on every address, as torch's store binds it; False on
    timeout (see `kubetrain.local.executor.ports` for what takes a port for a while)."""
    deadline = time.monotonic() + timeout
    while not port_is_free(WILDCARD, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def port_holders(port: int) -> str:
    """What ``ss`` shows bound to ``port`` (sockets with their processes), for a skip message
    that says who kept the port."""
    try:
        shown = subprocess.run(
            ["ss", "-Htanp", f"sport = :{port}"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"(ss failed: {err})"
    return " | ".join(" ".join(line.split()) for line in shown.splitlines()) or "(ss shows none)"


def bwrap_usable() -> bool:
    from kubetrain.local.sandbox import sandbox_mode

    return sandbox_mode().mode == "bwrap" and os.path.exists("/usr/sbin/sshd")
