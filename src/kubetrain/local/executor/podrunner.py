"""The kubelet for one pod: start (or adopt) its containers, restart them as
``restartPolicy`` says, and report every change as Pod status and Events.

Init containers run one after another; the containers then run side by side, each restarted in
place after a doubling back-off when the policy asks for it. A running container is probed as
the kubelet probes it: its startup probe first, then readiness and liveness side by side; one
that fails its liveness or startup probe is killed, and the policy says whether it restarts. A
pod adopted after a daemon restart continues from the containers the previous daemon left: live
ones are waited for, dead ones report the exit code their sandbox recorded (137,
ContainerStatusUnknown, when none was).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.local.sandbox import ContainerProcess, PodSandbox, SandboxContext, SandboxError
from kubetrain.local.sandbox.probes import Probe, Verdict, run_network_probe

from .jobs import FINAL_FAILURE_REASON
from .podstatus import PodStatusModel

__all__ = [
    "FINAL_FAILURE_REASON",
    "EmitEvent",
    "FinalFailure",
    "PodRunner",
    "Publish",
    "RunnerSettings",
]

Publish = Callable[[dict[str, Any]], Awaitable[None]]
# pod → True when its failure is final: its Job must not start a replacement (see jobs.py).
FinalFailure = Callable[[dict[str, Any]], bool]
# (type, reason, message)
EmitEvent = Callable[[str, str, str], Awaitable[None]]
Clock = Callable[[], str]


@dataclass(frozen=True)
class RunnerSettings:
    # The kubelet's crash-loop back-off (10 s doubling to 5 min on a node), on a laptop's scale.
    crash_backoff_s: float = 1.0
    crash_backoff_cap_s: float = 30.0
    # How often a pod whose setup failed (missing ConfigMap, ...) is tried again.
    setup_retry_s: float = 2.0


class PodRunner:
    """Runs one Pod object to its end, or until `stop`."""

    def __init__(
        self,
        pod: dict[str, Any],
        make_ctx: Callable[[], Awaitable[SandboxContext]],
        *,
        publish: Publish,
        emit: EmitEvent,
        clock: Clock,
        settings: RunnerSettings,
        pod_ip: str,
        host_ip: str = "127.0.0.1",
        final_failure: FinalFailure | None = None,
    ) -> None:
        self.pod = pod
        self.name = str(pod["metadata"]["name"])
        self.make_ctx = make_ctx
        self.publish_fn = publish
        self.emit = emit
        self.clock = clock
        self.settings = settings
        self.model = PodStatusModel(pod, pod_ip=pod_ip, host_ip=host_ip, now=clock())
        self.sandbox: PodSandbox | None = None
        self.stopping = False
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._published: dict[str, Any] | None = None
        spec = obj_at(pod, "spec")
        self.policy = str(spec.get("restartPolicy") or "Always")
        self.final_failure = final_failure

    async def publish(self) -> None:
        async with self._lock:
            status = self.model.status(self.clock())
            if status != self._published:
                await self.publish_fn(status)
                self._published = status

    # --- lifecycle ------------------------------------------------------------------------
    async def run(self, *, adopt: bool = False) -> str:
        """Run to the end; the final phase ('' when stopped before it ended)."""
        if not adopt:
            node = obj_at(self.pod, "spec").get("nodeName", "")
            ns = self.pod["metadata"].get("namespace", "default")
            await self.emit(
                "Normal", "Scheduled", f"Successfully assigned {ns}/{self.name} to {node}"
            )
            await self.publish()
        sandbox = await self._setup(adopt)
        if sandbox is None:
            return ""
        self.sandbox = sandbox
        spec = obj_at(self.pod, "spec")
        adopted = dict(sandbox.processes) if adopt else {}
        if adopt:
            self.model.resume(obj_at(self.pod, "status"))
        sidecars: list[str] = []
        main_adopted = any(str(c["name"]) in adopted for c in dicts(spec.get("containers")))
        for c in dicts(spec.get("initContainers")):
            name = str(c["name"])
            if self.stopping:
                return ""
            if main_adopted and name not in adopted:
                continue  # init finished before the containers the previous daemon started
            if c.get("restartPolicy") == "Always":
                await self._start(name, 0, True, adopted.get(name))
                sidecars.append(name)
                continue
            code = await self._loop(name, True, adopted.get(name))
            if code != 0:
                await self._stop_sidecars(sidecars)
                return await self._end()
        if self.stopping:
            return ""
        names = [str(c["name"]) for c in dicts(spec.get("containers"))]
        await asyncio.gather(*(self._loop(n, False, adopted.get(n)) for n in names))
        await self._stop_sidecars(sidecars)
        return await self._end()

    def _final(self) -> bool:
        return self.final_failure is not None and self.final_failure(self.pod)

    async def _end(self) -> str:
        if self.stopping:
            return ""
        if self._final() and self.model.any_failed():
            # Failed for good: the pod ends Failed whatever its restartPolicy, and says why.
            message = self.model.failure_message() or "the container failed"
            self.model.fail(FINAL_FAILURE_REASON, message.strip().splitlines()[-1])
        await self.publish()
        return self.model.phase()

    async def _setup(self, adopt: bool) -> PodSandbox | None:
        """Build the sandbox, retrying while its inputs (ConfigMaps, Secrets) are missing."""
        while not self.stopping:
            try:
                ctx = await self.make_ctx()
                if adopt:
                    sandbox = PodSandbox.adopt(self.pod, ctx)
                    # Regenerates data volumes and /etc files; processes keep their mounts.
                    await asyncio.to_thread(sandbox.prepare)
                else:
                    sandbox = PodSandbox(self.pod, ctx)
                    await asyncio.to_thread(sandbox.prepare)
                return sandbox
            except SandboxError as err:
                for rec in [*self.model.init, *self.model.containers]:
                    if not rec.running and rec.terminated is None:
                        self.model.waiting(rec.name, err.reason, err.message)
                await self.emit("Warning", "Failed", f"Error: {err.message}")
                await self.publish()
                await self._sleep(self.settings.setup_retry_s)
        return None

    async def _start(
        self, name: str, restarts: int, init: bool, adopted: ContainerProcess | None
    ) -> ContainerProcess | None:
        assert self.sandbox is not None
        if adopted is not None:
            rec = self.model.record(name)
            if not rec.running or rec.restart_count != adopted.state.restart_count:
                self.model.started(
                    name, adopted.state.restart_count, self.clock(), f"kubetrain://{adopted.pid}"
                )
            return adopted
        try:
            proc = await self.sandbox.start_container(name, restart_count=restarts, init=init)
        except SandboxError as err:
            # A runtime's StartError: the container never ran; exit code 128 as containerd says.
            await self.emit("Warning", "Failed", f"Error: {err.message}")
            self.model.started(name, restarts, self.clock())
            self.model.exited(name, 128, self.clock())
            rec = self.model.record(name)
            if rec.terminated is not None:
                rec.terminated.update(reason="StartError", message=err.message)
            await self.publish()
            return None
        image = self.model.record(name).image
        await self.emit("Normal", "Pulled", f'Container image "{image}" already present on machine')
        await self.emit("Normal", "Created", f"Created container: {name}")
        await self.emit("Normal", "Started", f"Started container {name}")
        self.model.started(name, restarts, self.clock(), f"kubetrain://{proc.pid}")
        await self.publish()
        return proc

    async def _loop(self, name: str, init: bool, adopted: ContainerProcess | None) -> int:
        restarts = adopted.state.restart_count if adopted is not None else 0
        delay = self.settings.crash_backoff_s
        while True:
            proc = await self._start(name, restarts, init, adopted)
            adopted = None
            if proc is None:
                code = 128
            else:
                prober = self._probing(name, init, proc)
                try:
                    code = await proc.wait()
                finally:
                    if prober is not None:
                        prober.cancel()
                if self.stopping:
                    return code
                assert self.sandbox is not None
                message = await asyncio.to_thread(self.sandbox.termination_message, name, code)
                self.model.exited(
                    name, code, self.clock(), known=proc.exit_known, message=message,
                    reason="OOMKilled" if proc.oom_killed else None,
                )  # fmt: skip
                await self.publish()
            again = self.policy == "Always" or (self.policy == "OnFailure" and code != 0)
            if self.stopping or not again or (init and code == 0):
                return code
            if code != 0 and self._final():
                return code  # no restart in place either: it would fail the same way
            self.model.back_off(name, self.name)
            await self.emit(
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {name} in pod {self.name}",
            )
            await self.publish()
            await self._sleep(delay)
            delay = min(self.settings.crash_backoff_cap_s, delay * 2)
            if self.stopping:
                return code
            restarts += 1

    def _probing(self, name: str, init: bool, proc: ContainerProcess) -> asyncio.Task[None] | None:
        """Start probing a running container (when it has probes); the task ends with it."""
        container = next(
            (c for c in dicts(obj_at(self.pod, "spec").get("containers")) if c["name"] == name),
            None,
        )
        if container is None or init:
            return None
        startup, readiness, liveness = (
            Probe.of(container, f) for f in ("startupProbe", "readinessProbe", "livenessProbe")
        )
        if startup is None and readiness is None and liveness is None:
            return None
        began = asyncio.get_running_loop().time()
        return asyncio.create_task(
            self._probe_all(name, proc, began, startup, readiness, liveness),
            name=f"probes-{self.name}-{name}",
        )

    async def _probe_all(
        self,
        name: str,
        proc: ContainerProcess,
        began: float,
        startup: Probe | None,
        readiness: Probe | None,
        liveness: Probe | None,
    ) -> None:
        # As the kubelet's prober: readiness and liveness wait for the startup probe to pass;
        # every probe's initialDelaySeconds counts from the container's start.
        if startup is not None:
            verdict = await self._probe(name, startup, "Startup", began)
            if not verdict.ok:
                await self._kill_unhealthy(name, proc, startup, "startup")
                return
            self.model.startup_passed(name)
            await self.publish()
        ready = (
            asyncio.ensure_future(self._probe(name, readiness, "Readiness", began))
            if readiness is not None
            else None
        )
        try:
            if liveness is not None:
                await self._probe(name, liveness, "Liveness", began)
                await self._kill_unhealthy(name, proc, liveness, "liveness")
            elif ready is not None:
                await ready
        finally:
            if ready is not None:
                ready.cancel()

    async def _probe(self, name: str, probe: Probe, what: str, began: float) -> Verdict:
        """Run ``probe`` every period while the container runs. A readiness probe's verdicts go
        into the status and it never ends; a startup probe ends when it passes or fails for
        good, a liveness probe when it fails for good. The verdict it ended with."""
        verdict = Verdict(probe)
        warned = False  # one Unhealthy event per run of failures, not one per period
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, began + probe.initial_delay_s - loop.time()))
        while not self.stopping and self.sandbox is not None:
            if probe.kind == "exec":
                why = await self.sandbox.exec_probe(name, probe.command, probe.timeout_s)
            else:
                enter = self.sandbox.ctx.enter_netns
                why = await run_network_probe(probe, pod_ip=self.model.pod_ip, enter=enter)
            changed = verdict.observe(why is None)
            if why is not None and not warned:
                await self.emit("Warning", "Unhealthy", f"{what} probe failed: {why}")
            warned = why is not None
            if what == "Readiness" and changed:
                self.model.probed(name, verdict.ok)
                await self.publish()
            elif (what == "Startup" and verdict.ok) or (what != "Readiness" and verdict.failed):
                return verdict
            await asyncio.sleep(probe.period_s)
        return verdict  # stopping

    async def _kill_unhealthy(
        self, name: str, proc: ContainerProcess, probe: Probe, what: str
    ) -> None:
        """Kill a container that failed its liveness or startup probe, as the kubelet does;
        whether it restarts is the restart policy's to say."""
        if self.stopping:
            return
        await self.emit(
            "Normal", "Killing", f"Container {name} failed {what} probe, will be restarted"
        )
        grace = probe.termination_grace_s
        await proc.terminate(self._grace(None) if grace is None else grace)

    async def _stop_sidecars(self, names: list[str]) -> None:
        assert self.sandbox is not None
        for name in reversed(names):
            proc = self.sandbox.processes.get(name)
            if proc is not None:
                code = await proc.terminate(self._grace(None))
                self.model.exited(name, code, self.clock())

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)

    def _grace(self, cap: float | None) -> float:
        value = obj_at(self.pod, "spec").get("terminationGracePeriodSeconds")
        grace = 30.0 if value is None else float(value)
        return grace if cap is None else min(grace, cap)

    async def stop(self, grace_cap: float | None) -> None:
        """SIGTERM every container, SIGKILL after the grace period (capped); no restarts."""
        self.stopping = True
        self._wake.set()
        if self.sandbox is None:
            return
        for name, proc in self.sandbox.processes.items():
            if proc.is_alive():
                await self.emit("Normal", "Killing", f"Stopping container {name}")
        await self.sandbox.terminate(self._grace(grace_cap))
