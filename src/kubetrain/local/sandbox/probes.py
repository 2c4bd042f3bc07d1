"""Container probes (``httpGet``, ``tcpSocket``, ``exec``) as the kubelet runs them.

`Probe.of` reads a container's startup, readiness or liveness probe (named ports resolved, the
kubelet's defaults: period 10 s, timeout 1 s, success threshold 1, failure threshold 3);
`Verdict` applies the thresholds to results. Network probes run where the pod's ports are: inside the pod's network namespace
(``enter``: the argv prefix containers get) through `netprobe`'s script, or in this process
when pods share the host's network. An exec probe runs its command in the container's sandbox
(`PodSandbox.exec_probe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_list, dicts

from . import netprobe

__all__ = ["Probe", "Verdict", "run_argv", "run_network_probe"]


@dataclass(frozen=True)
class Probe:
    kind: str  # "http" | "tcp" | "exec"
    port: int = 0
    host: str = ""
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()
    initial_delay_s: float = 0.0
    period_s: float = 10.0
    timeout_s: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    # The probe's own terminationGracePeriodSeconds (liveness and startup probes): the grace a
    # container killed for failing it gets instead of the pod's.
    termination_grace_s: float | None = None

    @classmethod
    def of(cls, container: Mapping[str, Any], field_name: str = "readinessProbe") -> Probe | None:
        """The container's probe; None when it has none (or one of a kind not run here:
        ``grpc`` probes are not supported yet and count as none)."""
        spec = container.get(field_name)
        if not isinstance(spec, Mapping):
            return None
        timing = {
            "initial_delay_s": float(spec.get("initialDelaySeconds") or 0),
            "period_s": float(spec.get("periodSeconds") or 10),
            "timeout_s": float(spec.get("timeoutSeconds") or 1),
            "success_threshold": int(spec.get("successThreshold") or 1),
            "failure_threshold": int(spec.get("failureThreshold") or 3),
            "termination_grace_s": (
                None
                if spec.get("terminationGracePeriodSeconds") is None
                else float(spec["terminationGracePeriodSeconds"])
            ),
        }
        if isinstance(spec.get("exec"), Mapping):
            command = tuple(str(c) for c in as_list(spec["exec"].get("command")))
            return cls("exec", command=command, **timing)  # type: ignore[arg-type]
        for key, kind in (("httpGet", "http"), ("tcpSocket", "tcp")):
            handler = spec.get(key)
            if isinstance(handler, Mapping):
                return cls(
                    kind,
                    port=_port(handler.get("port"), container),
                    host=str(handler.get("host") or ""),
                    path=str(handler.get("path") or "/"),
                    scheme=str(handler.get("scheme") or "HTTP"),
                    headers=tuple(
                        (str(h.get("name")), str(h.get("value")))
                        for h in dicts(handler.get("httpHeaders"))
                    ),
                    **timing,  # type: ignore[arg-type]
                )
        return None


def _port(value: Any, container: Mapping[str, Any]) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    for port in dicts(container.get("ports")):
        if port.get("name") == value:
            return int(port["containerPort"])
    return 0  # an unknown named port: every probe fails, as the kubelet's does


@dataclass
class Verdict:
    """Consecutive results against a probe's thresholds: ``ok`` turns True after
    ``successThreshold`` successes in a row and False after ``failureThreshold`` failures in a
    row. It starts False: a container is neither ready nor started before its first success."""

    probe: Probe
    ok: bool = False
    _streak: int = field(default=0)
    _last: bool | None = None

    def observe(self, ok: bool) -> bool:
        """Record one result; True when ``ok`` changed."""
        self._streak = self._streak + 1 if ok == self._last else 1
        self._last = ok
        before = self.ok
        if ok and self._streak >= self.probe.success_threshold:
            self.ok = True
        elif not ok and self._streak >= self.probe.failure_threshold:
            self.ok = False
        return before != self.ok

    @property
    def failed(self) -> bool:
        """``failureThreshold`` failures in a row: what a liveness or startup probe kills on."""
        return self._last is False and self._streak >= self.probe.failure_threshold


async def run_network_probe(probe: Probe, *, pod_ip: str, enter: Sequence[str]) -> str | None:
    """One httpGet/tcpSocket probe of a pod; None on success, else why it failed."""
    # The kubelet's default host: the pod's IP (with the host's network, its own loopback
    # address), reached from inside the pod's network namespace when it has one.
    host = probe.host or pod_ip
    if not probe.port:
        return "the probe's port names no port of the container"
    if enter:
        args = [str(probe.port), str(probe.timeout_s)]
        if probe.kind == "http":
            args += [probe.path, probe.scheme, *(f"{k}:{v}" for k, v in probe.headers)]
        argv = [*enter, sys.executable, "-I", netprobe.__file__, probe.kind, host, *args]
        return await run_argv(argv, probe.timeout_s)
    call: Callable[[], str | None]
    if probe.kind == "tcp":
        call = lambda: netprobe.check_tcp(host, probe.port, probe.timeout_s)  # noqa: E731
    else:
        call = lambda: netprobe.check_http(  # noqa: E731
            host, probe.port, probe.path, probe.scheme, probe.timeout_s, dict(probe.headers)
        )
    return await asyncio.to_thread(call)


async def run_argv(
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> str | None:
    """Run one probe process; None when it exits 0, else its last line of output."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=dict(env) if env is not None else None,
            cwd=cwd, start_new_session=True,
        )  # fmt: skip
    except OSError as err:
        return f"cannot run {argv[0]}: {err}"
    try:
        # A process start costs more than the probe on a loaded machine: a second of slack.
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s + 1.0)
    except TimeoutError:
        proc.kill()
        await proc.communicate()
        return f"probe timed out after {timeout_s:g}s"
    except asyncio.CancelledError:
        # The container ended mid-probe: the probe process must not outlive it.
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.communicate()
        raise
    if proc.returncode == 0:
        return None
    text = out.decode(errors="replace").strip()
    return text.splitlines()[-1] if text else f"exit code {proc.returncode}"
