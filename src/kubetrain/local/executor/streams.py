"""The kubelet's streaming half: ``exec``, ``attach`` and ``port-forward`` into this node's pods.

The API server serves ``pods/exec``, ``pods/attach`` and ``pods/portforward`` and hands the
connection to whatever the daemon registered with it at start-up: a `PodStreams` over the
kubelet's running pods. The API server never imports this module (`kubetrain.local.daemon`
joins the two, as a cluster's API server reaches a kubelet only through its address).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import obj_at
from kubetrain.local.sandbox import ContainerProcess, PodSandbox, SandboxError
from kubetrain.local.sandbox.enter import (
    ExecSession,
    PodConnection,
    dial_pod,
    start_exec,
    write_all,
)

if TYPE_CHECKING:  # pragma: no cover
    from .kubelet import Kubelet

__all__ = ["AttachSession", "PodStreams"]

_POLL_S = 0.1


class PodStreams:
    """What ``pods/exec``, ``pods/attach`` and ``pods/portforward`` reach on this node.

    Every method raises `LookupError` (the kubelet's wording) when the pod or container is
    not running here, and `SandboxError` when the sandbox cannot be entered.
    """

    def __init__(self, kubelet: Kubelet) -> None:
        self.kubelet = kubelet

    def _sandbox(self, pod: Mapping[str, Any]) -> PodSandbox:
        uid = str(obj_at(pod, "metadata").get("uid", ""))
        runner = self.kubelet.runners.get(uid)
        if runner is None or runner.sandbox is None:
            name = obj_at(pod, "metadata").get("name", "")
            raise LookupError(f'pod "{name}" is not running on this node')
        return runner.sandbox

    def _container(
        self, pod: Mapping[str, Any], container: str
    ) -> tuple[PodSandbox, ContainerProcess]:
        uid = str(obj_at(pod, "metadata").get("uid", ""))
        runner = self.kubelet.runners.get(uid)
        sandbox = runner.sandbox if runner is not None else None
        proc = sandbox.processes.get(container) if sandbox is not None else None
        if sandbox is None or proc is None or not proc.is_alive():
            # The kubelet's words for a container that is not (or no longer) running.
            raise LookupError(f'container not found ("{container}")')
        return sandbox, proc

    def check(self, pod: Mapping[str, Any], container: str | None) -> None:
        if container is None:
            self._sandbox(pod)
        else:
            self._container(pod, container)

    async def exec(
        self,
        pod: Mapping[str, Any],
        container: str,
        command: Sequence[str],
        *,
        stdin: bool,
        tty: bool,
    ) -> ExecSession:
        sandbox, proc = self._container(pod, container)
        return await start_exec(
            proc, sandbox.pod, sandbox.ctx, sandbox.mode, command, stdin=stdin, tty=tty
        )

    async def attach(
        self, pod: Mapping[str, Any], container: str, *, stdin: bool, tty: bool
    ) -> AttachSession:
        _, proc = self._container(pod, container)
        return AttachSession(proc, stdin=stdin)

    async def dial(self, pod: Mapping[str, Any], port: int) -> PodConnection:
        sandbox = self._sandbox(pod)
        if not sandbox.is_alive():
            raise LookupError(f'pod "{sandbox.name}" is not running on this node')
        try:
            return await dial_pod(sandbox.ctx.enter_netns, sandbox.ctx.pod_ip, port)
        except OSError as err:
            raise SandboxError(
                f"failed to connect to {sandbox.ctx.pod_ip}:{port}: {err.strerror or err}"
            ) from err


class AttachSession:
    """The container's own output from now on, until it ends, and its input.

    Containers here write their output to a log file (a terminal's too, with ``tty: true``),
    so an attach follows that file. What the client types goes to the container's stdin when
    it was started with ``stdin: true``, and is dropped otherwise, as a runtime drops it; a
    resize reaches the container's terminal.
    """

    stderr: asyncio.StreamReader | None = None

    def __init__(self, proc: ContainerProcess, *, stdin: bool) -> None:
        self._proc = proc
        self.tty = proc.tty
        self._stdin = proc.open_stdin() if stdin else None
        self.stdout: asyncio.StreamReader | None = asyncio.StreamReader()
        self._task = asyncio.ensure_future(self._follow(proc.log_path))

    async def _follow(self, path: Path) -> None:
        assert self.stdout is not None
        offset = path.stat().st_size if path.exists() else 0
        while True:
            alive = self._proc.is_alive()
            more = await asyncio.to_thread(_read_from, path, offset)
            if more:
                offset += len(more)
                self.stdout.feed_data(more)
            elif not alive:
                break
            else:
                await asyncio.sleep(_POLL_S)
        self.stdout.feed_eof()

    async def write_stdin(self, data: bytes) -> None:
        if self._stdin is not None:
            await write_all(self._stdin, data)

    def close_stdin(self) -> None:
        """The client's input has ended: so has the container's with ``stdinOnce``."""
        if self._stdin is not None:
            os.close(self._stdin)
            self._stdin = None
            self._proc.attach_ended()

    def resize(self, width: int, height: int) -> None:
        self._proc.resize(width, height)

    async def wait(self) -> int:
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        code = self._proc.exit_code
        return 0 if code is None else code

    def kill(self) -> None:
        self.close()

    def close(self) -> None:
        self._task.cancel()
        self.close_stdin()


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read()
    except FileNotFoundError:
        return b""
