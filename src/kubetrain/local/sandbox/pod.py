"""A whole pod: volumes and generated files once, init containers in order, then the
containers side by side, restarted in place as ``restartPolicy`` says.

The executor drives one `PodSandbox` per Pod object and maps what it reports (events and
a `PodResult` of per-container exit codes) to Pod phases; this module knows nothing of Jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kubetrain.api.access import dicts, obj_at

from .cgroups import limits_of
from .context import SandboxContext, SandboxMode
from .errors import SandboxError
from .hosts import hosts_file, pod_dns_names
from .identity import write_identity
from .launch import Launch, find_container, plan_launch, pod_hostname
from .mode import sandbox_mode
from .network import pod_resolv_conf
from .process import ContainerProcess
from .state import read_states
from .volumes import Mount, prepare_volumes

__all__ = [
    "TERMINATION_LOG",
    "TERMINATION_MESSAGE_MAX",
    "ContainerEvent",
    "EventHook",
    "PodResult",
    "PodSandbox",
]

# The kubelet's defaults: terminationMessagePath, and at most 4096 bytes of message (with
# FallbackToLogsOnError, the log's last 80 lines within 2048 bytes).
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_MESSAGE_MAX = 4096
_LOG_TAIL_LINES, _LOG_TAIL_BYTES = 80, 2048


@dataclass(frozen=True)
class ContainerEvent:
    """A container started or ended; ``exit_code`` is set for ``exited``."""

    container: str
    kind: Literal["started", "exited"]
    restart_count: int
    init: bool = False
    exit_code: int | None = None
    at: float = field(default_factory=time.time)  # wall clock, for startedAt / finishedAt


EventHook = Callable[[ContainerEvent], None]


@dataclass
class PodResult:
    """Last exit code of each container that ran, and how often each was restarted."""

    init_containers: dict[str, int] = field(default_factory=dict)
    containers: dict[str, int] = field(default_factory=dict)
    sidecars: dict[str, int] = field(default_factory=dict)  # stopped by us: not judged
    restarts: dict[str, int] = field(default_factory=dict)
    terminated: bool = False  # ended by `terminate`, not by itself

    @property
    def succeeded(self) -> bool:
        codes = [*self.init_containers.values(), *self.containers.values()]
        return bool(self.containers) and all(c == 0 for c in codes)


class PodSandbox:
    """Runs one Pod (Kubernetes JSON shape) as sandboxed local processes."""

    def __init__(self, pod: Mapping[str, Any], ctx: SandboxContext) -> None:
        self.pod = pod
        self.ctx = ctx
        report = sandbox_mode()
        self.mode: SandboxMode = ctx.mode or report.mode
        self._bwrap = report.bwrap
        self.hostname = pod_hostname(pod)
        meta = obj_at(pod, "metadata")
        self.namespace = str(meta.get("namespace") or "default")
        self.name = str(meta.get("name") or self.hostname)
        self.log_dir = ctx.log_dir / self.namespace / self.name
        self.state_dir = ctx.pod_dir / "state"
        self.processes: dict[str, ContainerProcess] = {}
        self.result = PodResult()
        self._volumes: dict[str, Path] | None = None
        self._stopping = False
        self._stopped = asyncio.Event()

    # -- setup ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create volumes and the generated /etc files. Raises `SandboxError`."""
        self.ctx.pod_dir.mkdir(parents=True, exist_ok=True)
        self._volumes = prepare_volumes(self.pod, self.ctx)
        etc = self.ctx.pod_dir / "etc"
        etc.mkdir(exist_ok=True)
        self.write_hosts(self.ctx.hosts, self.ctx.services)
        (etc / "hostname").write_text(self.hostname + "\n")
        if self.ctx.enter_netns:
            (etc / "resolv.conf").write_text(pod_resolv_conf())

    def write_hosts(self, hosts: Mapping[str, str], services: Mapping[str, Sequence[str]]) -> None:
        """(Re)write the pod's /etc/hosts in place: running containers see the new names,
        as a cluster's DNS answers for pods and Services that appeared after them."""
        own = pod_dns_names(
            self.hostname, obj_at(self.pod, "spec").get("subdomain"), self.namespace
        )
        text = hosts_file(hosts, own, self.ctx.pod_ip, services)
        path = self.ctx.pod_dir / "etc" / "hosts"
        with contextlib.suppress(OSError):
            if path.read_text() == text:
                return
        # Truncate and write, never replace: the sandbox's bind mount holds this inode.
        with open(path, "w") as f:
            f.write(text)

    def launch(self, container_name: str) -> Launch:
        """The resolved argv/env/mounts for one container (prepares the pod if needed)."""
        if self._volumes is None:
            self.prepare()
        assert self._volumes is not None
        container = find_container(self.pod, container_name)
        launch = plan_launch(self.pod, container, self.ctx, self._volumes, self.mode)
        if self.ctx.overlay is not None:
            self._apply_overlay(container, launch)
        if self.mode == "bwrap":
            own = {m.target for m in launch.mounts}
            message_path = str(container.get("terminationMessagePath") or TERMINATION_LOG)
            # bwrap can create the mount point only on its own /dev and tmpfs dirs, or bind
            # over a file the host has; elsewhere the container gets no message file.
            bindable = message_path.startswith(("/dev/", "/tmp/", "/run/")) or os.path.isfile(
                message_path
            )
            if bindable and message_path not in own:
                # A fresh empty file per start, as the kubelet gives each container one.
                launch.mounts.append(Mount(self._message_file(launch.name), message_path, False))
            etc = self.ctx.pod_dir / "etc"
            names = ["hosts", "hostname"] + (["resolv.conf"] if self.ctx.enter_netns else [])
            for name in names:
                if f"/etc/{name}" not in own:
                    launch.mounts.append(Mount(etc / name, f"/etc/{name}", read_only=True))
            if launch.user is not None and "/etc/passwd" not in own:
                image = self.ctx.images.resolve(container.get("image"))
                for path in write_identity(etc, launch.user, image.users, launch.env["HOME"]):
                    launch.mounts.append(Mount(path, f"/etc/{path.name.split('-')[0]}", True))
        return launch

    def _message_file(self, container_name: str, *, fresh: bool = True) -> Path:
        path = self.ctx.pod_dir / "termination" / container_name
        if fresh:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        return path

    def termination_message(self, container_name: str, exit_code: int) -> str:
        """What the kubelet reports as ``state.terminated.message`` after a container ended.

        The file at its ``terminationMessagePath`` (bwrap mode); with
        ``terminationMessagePolicy: FallbackToLogsOnError``, or in plain mode (which has no
        file to offer), the tail of its log when it failed and wrote no message.
        """
        text = ""
        if self.mode == "bwrap":
            with contextlib.suppress(OSError):
                raw = self._message_file(container_name, fresh=False).read_bytes()
                text = raw[:TERMINATION_MESSAGE_MAX].decode("utf-8", "replace")
        container = find_container(self.pod, container_name)
        fallback = (
            container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
            or self.mode == "plain"
        )
        if not text.strip() and exit_code != 0 and fallback:
            text = self._log_tail(container_name)
        return text

    def _log_tail(self, container_name: str) -> str:
        proc = self.processes.get(container_name)
        path = proc.log_path if proc is not None else self.log_dir / f"{container_name}.log"
        try:
            with path.open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
                data = f.read()
        except OSError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(lines)

    def _apply_overlay(self, container: Mapping[str, Any], launch: Launch) -> None:
        assert self.ctx.overlay is not None and self._volumes is not None
        work_dir = self.ctx.pod_dir / "overlay" / launch.name
        work_dir.mkdir(parents=True, exist_ok=True)
        extra = self.ctx.overlay(
            self.pod, container, pod_ip=self.ctx.pod_ip, env=dict(launch.env),
            volumes=self._volumes, work_dir=work_dir,
        )  # fmt: skip
        for name, value in extra.env.items():
            launch.env.setdefault(name, value)  # the container's own values win
        for source, target in extra.files:
            if self.mode == "bwrap":
                launch.mounts.append(Mount(Path(source), target, read_only=True))
            else:
                launch.warnings.append(f"plain mode: {target} is not provided ({source})")
        for source, target in getattr(extra, "dirs", ()):
            # Writable host directories (the initializers' cache); in plain mode the process
            # sees the host's path itself, so the overlay names the same path on both sides.
            if self.mode == "bwrap":
                launch.mounts.append(Mount(Path(source), target, read_only=False))

    async def start_container(
        self, name: str, *, restart_count: int = 0, init: bool = False
    ) -> ContainerProcess:
        """Start one container now; the executor may use this to drive restarts itself.

        Refused once `terminate` has begun, so nothing outlives a stopped pod.
        """
        if self._stopping:
            raise SandboxError(f"pod {self.name} is terminating", reason="Terminating")
        launch = self.launch(name)
        cgroup = None
        limits = limits_of(find_container(self.pod, name))
        if self.ctx.cgroups is not None and limits:
            uid = str(obj_at(self.pod, "metadata").get("uid") or self.name)
            try:
                cgroup = self.ctx.cgroups.create(self.ctx.cgroup_key, uid, name, limits)
            except OSError as err:
                raise SandboxError(
                    f"cannot set the limits of container {name!r}: {err}",
                    reason="CreateContainerError",
                ) from err
        proc = await ContainerProcess.start(
            launch, log_dir=self.log_dir, state_dir=self.state_dir,
            restart_count=restart_count, init=init, bwrap=self._bwrap,
            die_with_parent=self.ctx.die_with_parent, enter=self.ctx.enter_netns,
            cgroup=cgroup,
        )  # fmt: skip
        self.processes[name] = proc
        if self._stopping:
            # `terminate` began while this process was being created and did not see it.
            await proc.terminate(0)
        return proc

    async def exec_probe(self, name: str, command: Sequence[str], timeout_s: float) -> str | None:
        """Run an exec probe's ``command`` in container ``name``'s sandbox (its mounts, env,
        user and network); None when it exits 0, else why not."""
        from .bwrap import bwrap_argv
        from .probes import run_argv

        if not command:
            return "the exec probe has no command"
        launch = self.launch(name)
        if launch.mode == "bwrap" and self._bwrap is not None:
            enter = self.ctx.enter_netns
            argv = [
                *enter,
                *bwrap_argv(
                    self._bwrap, hostname=launch.hostname, mounts=launch.mounts,
                    workdir=launch.workdir, command=list(command), die_with_parent=True,
                    user=launch.user, hidden=launch.hidden, shown=launch.shown,
                    as_root=os.geteuid() == 0 or "-U" in enter,
                ),
            ]  # fmt: skip
            return await run_argv(argv, timeout_s, launch.env)
        return await run_argv(list(command), timeout_s, launch.env, cwd=launch.workdir)

    # -- lifecycle -----------------------------------------------------------------------

    def _restart_policy(self) -> str:
        return str(obj_at(self.pod, "spec").get("restartPolicy") or "Always")

    async def _run_one(
        self, name: str, init: bool, on_event: EventHook | None, backoff: float, cap: float
    ) -> int | None:
        """Run one container to its final end; None when the pod stopped before it began."""
        policy = self._restart_policy()
        restarts = 0
        delay = backoff
        while True:
            if self._stopping:
                return None
            proc = await self.start_container(name, restart_count=restarts, init=init)
            if on_event:
                on_event(ContainerEvent(name, "started", restarts, init))
            code = await proc.wait()
            if on_event:
                on_event(ContainerEvent(name, "exited", restarts, init, code))
            again = policy == "Always" or (policy == "OnFailure" and code != 0)
            if self._stopping or not again or (init and code == 0):
                self.result.restarts[name] = restarts
                return code
            # Back off as the kubelet does (doubling, capped), but on a laptop's scale;
            # `terminate` cuts the wait short.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), delay)
            delay = min(cap, delay * 2)
            if self._stopping:
                self.result.restarts[name] = restarts
                return code
            restarts += 1

    async def run(
        self,
        *,
        on_event: EventHook | None = None,
        backoff: float = 1.0,
        backoff_cap: float = 30.0,
    ) -> PodResult:
        """Run the pod to its end (or until `terminate`) and return the exit codes.

        Init containers run one after another and stop the pod at the first that fails for
        good; init containers with ``restartPolicy: Always`` are sidecars: started, not
        waited for, and stopped once the containers have ended (a sidecar that exits early
        is not restarted). A `SandboxError` (bad config, missing program) propagates; the
        containers already running keep running until `terminate`.
        """
        self.prepare()
        spec = obj_at(self.pod, "spec")
        sidecars: list[str] = []
        for c in dicts(spec.get("initContainers")):
            if self._stopping:
                return self._finish()
            name = str(c["name"])
            if c.get("restartPolicy") == "Always":
                await self.start_container(name, init=True)
                if on_event:
                    on_event(ContainerEvent(name, "started", 0, True))
                sidecars.append(name)
                continue
            code = await self._run_one(name, True, on_event, backoff, backoff_cap)
            if code is None:
                break
            self.result.init_containers[name] = code
            if code != 0:
                await self._stop_sidecars(sidecars)
                return self._finish()
        if self._stopping:
            return self._finish()
        names = [str(c["name"]) for c in dicts(spec.get("containers"))]
        codes = await asyncio.gather(
            *(self._run_one(n, False, on_event, backoff, backoff_cap) for n in names)
        )
        self.result.containers.update(
            (n, c) for n, c in zip(names, codes, strict=True) if c is not None
        )
        await self._stop_sidecars(sidecars)
        return self._finish()

    async def _stop_sidecars(self, names: list[str]) -> None:
        # Reverse start order, as the kubelet stops sidecars.
        for name in reversed(names):
            code = await self.processes[name].terminate(self._grace())
            self.result.sidecars[name] = code

    def _finish(self) -> PodResult:
        self.result.terminated = self._stopping
        return self.result

    def _grace(self) -> float:
        value = obj_at(self.pod, "spec").get("terminationGracePeriodSeconds")
        return 30.0 if value is None else float(value)

    def is_alive(self) -> bool:
        return any(p.is_alive() for p in self.processes.values())

    async def terminate(self, grace: float | None = None) -> dict[str, int]:
        """Stop every container: SIGTERM, then SIGKILL after ``grace`` (default: the pod's
        ``terminationGracePeriodSeconds``, else 30 s). No restarts follow."""
        self._stopping = True
        self._stopped.set()
        g = self._grace() if grace is None else grace
        codes: dict[str, int] = {}
        seen: set[int] = set()
        # Repeat until no new process turns up: one may have been starting meanwhile.
        while pending := [p for p in self.processes.values() if id(p) not in seen]:
            seen.update(id(p) for p in pending)
            ended = await asyncio.gather(*(p.terminate(g) for p in pending))
            codes.update((p.name, c) for p, c in zip(pending, ended, strict=True))
        return codes

    async def wait(self) -> dict[str, int]:
        """Exit codes of the containers started so far (or adopted), once all have ended."""
        procs = list(self.processes.values())
        codes = await asyncio.gather(*(p.wait() for p in procs))
        return {p.name: c for p, c in zip(procs, codes, strict=True)}

    # -- after a daemon restart ----------------------------------------------------------

    @classmethod
    def adopt(cls, pod: Mapping[str, Any], ctx: SandboxContext) -> PodSandbox:
        """A sandbox holding the containers a previous daemon started for this pod.

        Each is alive or not (`ContainerProcess.is_alive`); `wait` gives the codes (those it
        cannot know are `UNKNOWN_EXIT_CODE` with ``exit_known`` False); `terminate` ends them.
        """
        sandbox = cls(pod, ctx)
        for state in read_states(ctx.pod_dir):
            sandbox.processes[state.container] = ContainerProcess.adopt(state)
        return sandbox
