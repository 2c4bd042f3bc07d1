"""Into a running container: ``kubectl exec`` and ``kubectl port-forward`` on this machine.

An exec runs the command inside the container's sandbox as a runtime's exec does: in its
mount, PID, UTS and network namespaces (``nsenter`` into the process bwrap made PID 1 there),
with the environment the container started with and its working dir, as the container's user,
with no more capabilities than the container and inside its cgroups. In plain mode there are
no namespaces to enter: the command runs beside the container with the same environment. The
tools are util-linux's (``nsenter``, ``setsid``, ``setpriv``) and coreutils' ``env -C``.

A port-forward connects to ``localhost:<port>`` inside the pod's network namespace, as the
kubelet's runtimes do. The daemon sits in another network namespace (the pod network lives in
one the engine holds), so a small relay started in the pod's namespace carries the bytes over
its stdin and stdout; without the pod network the pod's own loopback address is dialled
directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import sys
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .bwrap import DEFAULT_CAPS
from .cgroups import ContainerCgroup
from .context import SandboxContext, SandboxMode
from .errors import SandboxError
from .launch import find_container, run_as
from .process import ContainerProcess
from .procfs import descendants

__all__ = [
    "ExecSession",
    "PodConnection",
    "container_environ",
    "dial_pod",
    "enter_argv",
    "start_exec",
    "write_all",
]

# Read by the relay: pump stdin to the socket and the socket to stdout, half-closing each way.
RELAY = r"""
import os, socket, sys, threading
try:
    s = socket.create_connection(("localhost", int(sys.argv[1])))
except OSError as err:
    sys.stderr.write(f"failed to connect to localhost:{sys.argv[1]} inside the pod's network namespace: {err.strerror or err}")
    sys.exit(1)
def up():
    while data := os.read(0, 65536):
        s.sendall(data)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
while data := s.recv(65536):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
os._exit(0)  # the reading thread may still wait on stdin
"""

_READ = 65536
_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Linux's ioctl numbers (x86, arm and riscv alike), which the termios module lacks.
_TIOCSPTLCK = 0x40045431  # unlock the slave
_TIOCGPTPEER = 0x5441  # open the slave


def _ns(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _sandbox_init(proc: ContainerProcess) -> int | None:
    """The process bwrap made PID 1 of the container's namespaces (None: none alive)."""
    if not proc.is_alive():
        return None
    ours = _ns("self", "mnt")
    for info in descendants(proc.pid):
        if _ns(info.pid, "mnt") not in (None, ours):
            return info.pid
    return None


def container_environ(proc: ContainerProcess) -> dict[str, str]:
    """The environment the container was started with: what every wrapper and the workload
    received (bwrap and nsenter pass it through unchanged)."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError as err:
        raise SandboxError(f"cannot read the container's environment: {err}") from err
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _own_cgroups(pid: int) -> ContainerCgroup | None:
    """The cgroups ``pid`` was put in for its limits: those it does not share with us."""
    try:
        theirs = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        ours = set(Path("/proc/self/cgroup").read_text().splitlines())
    except OSError:
        return None
    dirs, version = [], 1
    for line in theirs:
        if line in ours:
            continue
        _, controllers, path = line.split(":", 2)
        if not controllers:
            dirs.append(_CGROUP_ROOT / path.lstrip("/"))
            version = 2
        elif "memory" in controllers.split(",") or "cpu" in controllers.split(","):
            dirs.append(_CGROUP_ROOT / controllers / path.lstrip("/"))
    return ContainerCgroup(version, tuple(dirs)) if dirs else None


def enter_argv(proc: ContainerProcess, pod: Mapping[str, Any], workdir: str) -> list[str]:
    """The argv prefix that runs a command inside the container's namespaces.

    The container's user namespace (``runAsUser``, or the rootless pod network's) is entered
    as the container's user. Raises `SandboxError` when the container is not running.
    """
    target = _sandbox_init(proc)
    if target is None:
        raise SandboxError(f'container not found ("{proc.name}")', reason="NotRunning")
    argv = ["nsenter", "-t", str(target), "-m", "-u", "-p", "-n", "-r"]
    uid = os.geteuid()
    if _ns(target, "user") != _ns("self", "user"):
        user = run_as(pod, find_container(pod, proc.name)) or (0, 0)
        argv += ["-U", "-S", str(user[0]), "-G", str(user[1])]
        uid = user[0]
    # The command gets no more than the container got: no new privileges, and as root only a
    # runtime's default capabilities (bwrap dropped the rest for the container itself).
    argv += ["--", "setpriv", "--no-new-privs"]
    if uid == 0:
        caps = ",".join("+" + c.removeprefix("CAP_").lower() for c in DEFAULT_CAPS)
        argv += ["--inh-caps=-all", f"--bounding-set=-all,{caps}"]
    # The working dir is changed to inside the new root (nsenter's --wd opens its path before
    # entering; --wdns is too recent to count on).
    return [*argv, "env", "-C", workdir]


class ExecSession:
    """A command running in a container: its stdio (a pty when ``tty``), resize, exit code."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None) -> None:
        self._proc = proc
        self._master = master
        self.tty = master is not None
        self.stdout: asyncio.StreamReader | None = proc.stdout
        self.stderr: asyncio.StreamReader | None = proc.stderr
        if master is not None:
            self.stdout = _pty_reader(master)

    async def write_stdin(self, data: bytes) -> None:
        if self._master is not None:
            await write_all(self._master, data)
        elif self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self._proc.stdin.drain()

    def close_stdin(self) -> None:
        if self._master is not None:
            # A terminal has no end of input: the line discipline's EOF character stands in.
            with contextlib.suppress(OSError):
                os.write(self._master, b"\x04")
        elif self._proc.stdin is not None:
            self._proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self._master is not None and width > 0 and height > 0:
            size = struct.pack("HHHH", height, width, 0, 0)
            with contextlib.suppress(OSError):
                fcntl.ioctl(self._master, termios.TIOCSWINSZ, size)

    async def wait(self) -> int:
        """The exit code, signal deaths as a runtime reports them (128 + signal)."""
        rc = await self._proc.wait()
        return 128 - rc if rc < 0 else rc

    def kill(self) -> None:
        """End the command and whatever it started: its process group, and with a terminal
        the session inside the container too (the hang-up of its terminal)."""
        with contextlib.suppress(OSError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        if self._master is not None:
            asyncio.get_running_loop().remove_reader(self._master)
            with contextlib.suppress(OSError):
                os.close(self._master)
            self._master = None


async def write_all(fd: int, data: bytes) -> None:
    """Write to a non-blocking fd (a terminal master, a FIFO), waiting while its buffer is
    full; a reader that has gone ends the write."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await asyncio.sleep(0.01)
        except OSError:
            return  # the terminal is gone: so is whoever would have read it


def _pty_reader(master: int) -> asyncio.StreamReader:
    """The pty's output as a stream; it ends when every holder of the terminal has gone."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()

    def readable() -> None:
        try:
            data = os.read(master, _READ)
        except OSError:  # EIO: the last process holding the terminal closed it
            data = b""
        if data:
            reader.feed_data(data)
        else:
            loop.remove_reader(master)
            reader.feed_eof()

    os.set_blocking(master, False)
    loop.add_reader(master, readable)
    return reader


def _open_pty(root: str) -> tuple[int, int]:
    """A terminal pair from the devpts of the filesystem at ``root``: inside a sandbox it
    must be the sandbox's own (bwrap mounts a fresh one), or the command finds no name for
    its terminal and job control fails, as a runtime allocates it inside the container."""
    if root == "/":
        return pty.openpty()
    master = os.open(os.path.join(root, "dev/ptmx"), os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(master, _TIOCSPTLCK, struct.pack("i", 0))
        # TIOCGPTPEER: the slave opened from the master, with no path lookup (Linux 4.13).
        slave = fcntl.ioctl(master, _TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        os.close(master)
        raise
    return master, slave


async def start_exec(
    proc: ContainerProcess,
    pod: Mapping[str, Any],
    ctx: SandboxContext,
    mode: SandboxMode,
    command: Sequence[str],
    *,
    stdin: bool,
    tty: bool,
) -> ExecSession:
    """Run ``command`` in the running container ``proc`` of ``pod``. Raises `SandboxError`."""
    if not command:
        raise SandboxError("you must specify at least one command for the container")
    container = find_container(pod, proc.name)
    env = container_environ(proc)
    image = ctx.images.resolve(container.get("image"))
    workdir = str(container.get("workingDir") or image.workdir)
    # The terminal's session starts inside the container (with -w: also where setsid forks).
    session = ["setsid", "-w", "-c"] if tty else []
    root = "/"
    if mode == "bwrap":
        argv = [*enter_argv(proc, pod, workdir), *session, *command]
        cwd = "/"
        root = f"/proc/{_sandbox_init(proc)}/root"
    else:
        if not proc.is_alive():
            raise SandboxError(f'container not found ("{proc.name}")', reason="NotRunning")
        argv = [*session, *command]
        cwd = workdir if os.path.isdir(workdir) else str(ctx.pod_dir)
    # The command counts against the container's limits, as a runtime's exec does.
    cgroup = _own_cgroups(proc.pid)
    if cgroup is not None:
        argv = cgroup.prelude(argv)
    master: int | None = None
    try:
        if tty:
            master, slave = _open_pty(root)
            env.setdefault("TERM", "xterm")
            try:
                spawned = await asyncio.create_subprocess_exec(
                    *argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                    start_new_session=True,
                )  # fmt: skip
            finally:
                os.close(slave)
        else:
            spawned = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
                cwd=cwd, start_new_session=True,
            )  # fmt: skip
    except OSError as err:
        if master is not None:
            os.close(master)
        raise SandboxError(f"cannot start {argv[0]}: {err}", reason="RunContainerError") from err
    return ExecSession(spawned, master)


class PodConnection:
    """A byte stream to one port of a pod, from its start to both ends' close."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None,
        relay: asyncio.subprocess.Process | None,
    ) -> None:
        self.reader = reader
        self._writer = writer
        self._relay = relay

    async def write(self, data: bytes) -> None:
        sink = self._relay.stdin if self._relay is not None else self._writer
        if sink is None or sink.is_closing():
            return
        sink.write(data)
        with contextlib.suppress(ConnectionError):
            await sink.drain()

    def write_eof(self) -> None:
        """No more bytes from the client: the pod's side reads its end of input."""
        if self._relay is not None:
            if self._relay.stdin is not None:
                self._relay.stdin.close()
        elif self._writer is not None and self._writer.can_write_eof():
            with contextlib.suppress(OSError):
                self._writer.write_eof()

    async def error(self) -> str:
        """After the stream ended: why it failed ("" when it did not)."""
        if self._relay is None:
            return ""
        assert self._relay.stderr is not None
        text = (await self._relay.stderr.read()).decode(errors="replace").strip()
        code = await self._relay.wait()
        return text or (f"relay exited with {code}" if code else "")

    def close(self) -> None:
        if self._relay is not None:
            with contextlib.suppress(OSError):
                os.killpg(self._relay.pid, signal.SIGKILL)
        elif self._writer is not None:
            self._writer.close()


async def dial_pod(enter: Sequence[str], address: str, port: int) -> PodConnection:
    """A connection to ``port`` of the pod: ``localhost`` through a relay in its network
    namespace (``enter``: the argv prefix into it), else ``address`` (the pod's own loopback
    address when pods share the host's network). Raises `OSError` when nothing listens
    there (with the relay: `PodConnection.error` says so once the stream has ended)."""
    if not enter:
        reader, writer = await asyncio.open_connection(address, port)
        return PodConnection(reader, writer, None)
    relay = await asyncio.create_subprocess_exec(
        *enter, sys.executable, "-I", "-c", RELAY, str(port),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert relay.stdout is not None
    return PodConnection(relay.stdout, None, relay)
