"""One running container: start it sandboxed, wait for it, stop it, or find it again.

Each container is the leader of its own session and process group, never the daemon's, so
a terminal's Ctrl-C or the daemon's own death does not reach it; a restarted daemon finds it
again from the state file (`adopt`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from .bwrap import PRIVATE_TMPFS, bwrap_argv, shown_binds
from .cgroups import ContainerCgroup
from .errors import SandboxError
from .launch import Launch
from .procfs import ProcInfo, proc_info, processes_of, signal_all
from .reaper import REAPER
from .state import ContainerState, read_exit_code, write_state
from .terminal import TERMINAL, resize_terminal, terminal_of, tty_command

__all__ = ["UNKNOWN_EXIT_CODE", "ContainerProcess", "rotate_log"]

# What the kubelet reports (with reason ContainerStatusUnknown) for a container whose end it
# did not see; we use it for an adopted container whose exit code was never written.
UNKNOWN_EXIT_CODE = 137
# A container's processes start with a runtime's umask, whatever the engine's own (the
# daemon keeps its files private with 077).
CONTAINER_UMASK = 0o022


def rotate_log(log_dir: Path, container: str, restart_count: int) -> Path:
    """``<container>.log`` for this run; the previous run's moves to ``<container>.<n-1>.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    current = log_dir / f"{container}.log"
    if restart_count > 0 and current.exists():
        current.replace(log_dir / f"{container}.{restart_count - 1}.log")
    return current


def _as_on_host(path: str, launch: Launch) -> bool:
    """Whether the container sees ``path`` as the host has it: the deepest of the volumes,
    bwrap's private tmpfs dirs and the image directories bound back over them (`shown_binds`:
    a venv under ``/tmp``) that holds ``path`` decides; outside all of them, it does."""
    covers = [(m.target, False) for m in launch.mounts]
    if launch.mode == "bwrap":
        covers += [(t, False) for t in PRIVATE_TMPFS]
        covers += [(s, True) for s in shown_binds(launch.shown, launch.mounts, launch.hidden)]
    holding = [(len(root.rstrip("/")), seen) for root, seen in covers if _under(path, root)]
    return max(holding)[1] if holding else True


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _check_executable(launch: Launch) -> None:
    """Fail like a runtime's StartError when the program surely does not exist.

    Where the container does not see the host's files (`_as_on_host`), a missing program might
    still appear; that is left to exec.
    """
    prog = launch.command[0]
    if "/" in prog:
        if not prog.startswith("/") or not _as_on_host(prog, launch):
            return
        if os.access(prog, os.X_OK):
            return
        raise SandboxError(
            f'exec: "{prog}": stat {prog}: no such file or not executable',
            reason="RunContainerError",
        )
    search = launch.env.get("PATH", "")
    if not all(_as_on_host(d, launch) for d in search.split(":")):
        return
    if shutil.which(prog, path=search):
        return
    raise SandboxError(
        f'exec: "{prog}": executable file not found in $PATH', reason="RunContainerError"
    )


def _open_stdin(launch: Launch, fifo: Path) -> tuple[int | None, int | None]:
    """The container's stdin and the engine's own hold on it (``stdinOnce``), both None
    without ``stdin: true``.

    The input is a FIFO beside the state file, so an attach (even from a restarted daemon)
    opens it for writing. A container whose stdin stays open holds a writer itself (its stdin
    is opened read-write): a read waits for input instead of ending when no session is
    attached. With ``stdinOnce`` the engine holds that writer until the first attach session
    ends; the container then reads the end of its input.
    """
    fifo.unlink(missing_ok=True)
    if not launch.stdin:
        return None, None
    os.mkfifo(fifo, 0o600)
    held = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
    if not launch.stdin_once:
        return held, None
    return os.open(fifo, os.O_RDONLY | os.O_CLOEXEC), held


class ContainerProcess:
    """A started (or adopted) container. Not built directly: use `start` or `adopt`."""

    def __init__(self, state: ContainerState, proc: asyncio.subprocess.Process | None) -> None:
        self.state = state
        self._proc = proc
        self._exit_code: int | None = None
        self.exit_known = True
        self.finished_at: float | None = None  # wall clock, once `wait` has seen the end
        # The OOM killer ended it (over its memory limit); known once `wait` returns.
        self.oom_killed = False
        self._cgroup: ContainerCgroup | None = None
        self._oom_baseline = 0
        self._stdin_hold: int | None = None  # stdinOnce: the writer kept until an attach ends
        self._stdin_ended = False  # stdinOnce, after the first attach: later input is dropped

    @property
    def name(self) -> str:
        return self.state.container

    @property
    def pid(self) -> int:
        return self.state.pid

    @property
    def log_path(self) -> Path:
        return Path(self.state.log)

    @property
    def stdin_path(self) -> Path:
        """The FIFO the container reads as its stdin (present with ``stdin: true`` only)."""
        return Path(self.state.status_file).with_name(f"{self.name}.stdin")

    def open_stdin(self) -> int | None:
        """A non-blocking writer to the container's stdin; None when it has none (no
        ``stdin: true``) or no longer reads it (it ended, or ``stdinOnce`` ended its input)."""
        if self._stdin_ended:
            return None
        try:
            return os.open(self.stdin_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # ENOENT: no stdin; ENXIO: no reader left
            return None

    def attach_ended(self) -> None:
        """An attach session with stdin has ended: with ``stdinOnce`` the container's input
        ends too, once that session's own writer is closed."""
        if self._stdin_hold is not None:
            os.close(self._stdin_hold)
            self._stdin_hold = None
            self._stdin_ended = True

    @property
    def tty(self) -> bool:
        """Whether the container runs on a terminal (``tty: true``) and still has it."""
        return terminal_of(self.pid) is not None if self.is_alive() else False

    def resize(self, width: int, height: int) -> None:
        """The container's terminal gets this size (nothing without one)."""
        path = terminal_of(self.pid) if self.is_alive() else None
        if path is not None:
            resize_terminal(path, width, height)

    @property
    def exit_code(self) -> int | None:
        """Set once `wait` has seen the end."""
        return self._exit_code

    @classmethod
    async def start(
        cls,
        launch: Launch,
        *,
        log_dir: Path,
        state_dir: Path,
        restart_count: int = 0,
        init: bool = False,
        bwrap: str | None = None,
        die_with_parent: bool = False,
        enter: tuple[str, ...] = (),
        cgroup: ContainerCgroup | None = None,
    ) -> ContainerProcess:
        """``enter``: an argv prefix (nsenter into the pod's network) that execs bwrap;
        ``cgroup``: the container's limits, joined before anything runs."""
        _check_executable(launch)
        state_dir.mkdir(parents=True, exist_ok=True)
        log = rotate_log(log_dir, launch.name, restart_count)
        status = state_dir / f"{launch.name}.status"
        status_fd = os.open(status, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        # A first run starts a fresh log (a new pod may reuse an old one's name); a restart
        # has just rotated the previous run's log away.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_TRUNC
        log_fd = os.open(log, flags, 0o644)
        fds: list[int] = []
        stdin_fd: int | None = None
        stdin_hold: int | None = None
        spawned = False
        try:
            stdin_fd, stdin_hold = _open_stdin(launch, state_dir / f"{launch.name}.stdin")
            for warning in launch.warnings:
                os.write(log_fd, f"[kubetrain] {warning}\n".encode())
            command = tty_command(launch.command) if launch.tty else launch.command
            if launch.mode == "bwrap":
                if bwrap is None:
                    raise SandboxError(
                        "bwrap mode without a bwrap binary", reason="RunContainerError"
                    )
                full = bwrap_argv(
                    bwrap, hostname=launch.hostname, mounts=launch.mounts,
                    workdir=launch.workdir, command=command, status_fd=status_fd,
                    die_with_parent=die_with_parent, user=launch.user,
                    hidden=launch.hidden, shown=launch.shown,
                    # Entered into the network's user namespace bwrap runs as its root.
                    as_root=os.geteuid() == 0 or "-U" in enter,
                )  # fmt: skip
                # The options (hundreds of binds when /etc is split) go through a file
                # (``--args``): ps stays readable and no argv limit is ever near.
                cut = full.index("--")
                options = state_dir / f"{launch.name}.bwrap-args"
                options.write_bytes(b"".join(a.encode() + b"\0" for a in full[1:cut]))
                args_fd = os.open(options, os.O_RDONLY | os.O_CLOEXEC)
                argv = [*enter, bwrap, "--args", str(args_fd), *full[cut:]]
                cwd, fds = "/", [status_fd, args_fd]
            else:
                if enter:
                    raise SandboxError(
                        "a pod network needs the bwrap sandbox", reason="RunContainerError"
                    )
                argv = [sys.executable, "-I", "-c", REAPER, str(status), *command]
                cwd, fds = launch.workdir, []
            if launch.tty:
                argv = [sys.executable, "-I", "-c", TERMINAL, *argv]
            if cgroup is not None:
                argv = cgroup.prelude(argv)
                oom_baseline = cgroup.oom_kills()
            started_at = time.time()
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, stdout=log_fd,
                    stdin=asyncio.subprocess.DEVNULL if stdin_fd is None else stdin_fd,
                    stderr=asyncio.subprocess.STDOUT, env=launch.env, cwd=cwd,
                    start_new_session=True, pass_fds=fds, umask=CONTAINER_UMASK,
                )  # fmt: skip
            except OSError as err:
                raise SandboxError(
                    f"cannot start {argv[0]}: {err}", reason="RunContainerError"
                ) from err
            spawned = True
        finally:
            os.close(status_fd)
            os.close(log_fd)
            if stdin_fd is not None:
                os.close(stdin_fd)
            if stdin_hold is not None and not spawned:
                os.close(stdin_hold)
            for fd in fds[1:]:
                os.close(fd)
        info = proc_info(proc.pid)
        state = ContainerState(
            container=launch.name, restart_count=restart_count, init=init, pid=proc.pid,
            pgid=proc.pid, start_time=info.start_time if info else 0, mode=launch.mode,
            log=str(log), status_file=str(status), started_at=started_at,
        )  # fmt: skip
        write_state(state_dir / f"{launch.name}.json", state)
        started = cls(state, proc)
        started._stdin_hold = stdin_hold
        if cgroup is not None:
            started._cgroup, started._oom_baseline = cgroup, oom_baseline
        return started

    @classmethod
    def adopt(cls, state: ContainerState) -> ContainerProcess:
        """Take over a container a previous daemon started (it may have ended meanwhile)."""
        return cls(state, None)

    def _root(self) -> ProcInfo | None:
        info = proc_info(self.state.pid)
        if info is None or info.start_time != self.state.start_time or info.state in "ZX":
            return None
        return info

    def is_alive(self) -> bool:
        if self._proc is not None:
            return self._proc.returncode is None
        return self._exit_code is None and self._root() is not None

    def _members(self) -> list[ProcInfo]:
        return processes_of(self.state.pid, self.state.pgid, self.state.start_time)

    def _workload(self) -> list[ProcInfo]:
        # The wrappers (outer bwrap, bwrap's PID-1 init, plain mode's reaper) are left out of the
        # polite SIGTERM: the outer bwrap would die of it at once and its init would then
        # lose the command's exit code.
        root = self.state.pid
        return [
            p for p in self._members()
            if p.pid != root and not (p.comm == "bwrap" and p.ppid == root)
        ]  # fmt: skip

    def kill(self) -> None:
        """SIGKILL every process of the container, until none is left (bounded)."""
        for _ in range(20):
            procs = self._members()
            if not procs:
                return
            signal_all(procs, signal.SIGKILL)
            time.sleep(0.01)

    async def wait(self) -> int:
        """The exit code, once the container has ended; leftover processes are then killed."""
        if self._exit_code is not None:
            return self._exit_code
        if self._proc is not None:
            rc = await self._proc.wait()
            rc = 128 - rc if rc < 0 else rc  # signal deaths as a runtime reports them
        else:
            while self._root() is not None:
                await asyncio.sleep(0.2)
            rc = UNKNOWN_EXIT_CODE
        written = read_exit_code(Path(self.state.status_file))
        if written is None and self._proc is None:
            self.exit_known = False
        code = written if written is not None else rc
        # The container is over when its main process is; anything it left behind (plain
        # mode has no PID namespace to take it down) goes now, as on a node.
        await asyncio.to_thread(self.kill)
        self.attach_ended()  # nobody reads the input any more
        if self._cgroup is not None:
            self.oom_killed = self._cgroup.oom_kills() > self._oom_baseline
            self._cgroup.remove()
        self.finished_at = time.time()
        self._exit_code = code
        return code

    async def terminate(self, grace: float = 30.0) -> int:
        """SIGTERM the workload, SIGKILL everything after ``grace`` seconds; the exit code."""
        if not self.is_alive():
            return await self.wait()
        # Keyed by comm too: a process signalled between fork and exec may lose the signal
        # (a shell's trap handler is replaced by exec), so it is signalled again as its new self.
        signalled: set[tuple[int, int, str]] = set()
        deadline = time.monotonic() + grace
        waiter = asyncio.ensure_future(self.wait())
        try:
            while not waiter.done() and time.monotonic() < deadline:
                # Re-sent to processes that appear meanwhile (bwrap may still be setting up).
                fresh = [
                    p for p in self._workload() if (p.pid, p.start_time, p.comm) not in signalled
                ]
                signal_all(fresh, signal.SIGTERM)
                signalled.update((p.pid, p.start_time, p.comm) for p in fresh)
                await asyncio.wait(
                    {waiter}, timeout=min(0.1, max(0.0, deadline - time.monotonic()))
                )
            if not waiter.done():
                await asyncio.to_thread(self.kill)
            return await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
