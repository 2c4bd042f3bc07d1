"""A container's terminal (``tty: true``): what a runtime's shim holds for it.

Run as ``python -I -c TERMINAL <command...>`` with the daemon's interpreter, as the
container's first process (inside its cgroups, outside its sandbox: the command is bwrap, or
plain mode's reaper). It opens a pseudo-terminal, starts the command with the terminal as
its stdio, copies what the terminal prints to its own stdout (the container's log) and its
own stdin (the container's input FIFO, `process._open_stdin`) to the terminal, and exits
with the command's exit code. The end of the input (``stdinOnce``) is typed as the
terminal's end-of-file character, as ``kubectl exec -it`` does; a container without stdin
gets no input at all, never an end.

The workload itself makes the terminal its controlling one, from a session of its own
(`tty_command`): inside the sandbox's PID namespace, so that a shell's job control finds its
process groups there. The shim keeps the terminal's other end open itself, so that
`terminal_of` can find the terminal for a resize from any daemon, and it outlives the daemon,
as a runtime's shim does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import termios
from collections.abc import Sequence

from .errors import SandboxError

__all__ = ["TERMINAL", "resize_terminal", "terminal_of", "tty_command"]

TERMINAL = r"""
import os, pty, select, signal, stat, sys
caught = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
for s in caught:
    signal.signal(s, lambda *_: None)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
cmd = sys.argv[1:]
master, slave = pty.openpty()
pid = os.fork()
if pid == 0:
    for s in (*caught, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as err:
        os.write(2, f"exec {cmd[0]}: {err.strerror}\r\n".encode())
        os._exit(127)
reading = stat.S_ISFIFO(os.fstat(0).st_mode)
os.set_blocking(master, False)
pending, code = b"", None

def out(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]

def drain():
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            return
        if not data:
            return
        out(data)

while code is None:
    want = [master, wake_r] + ([0] if reading and not pending else [])
    r, w, _ = select.select(want, [master] if pending else [], [])
    if master in r:
        drain()
    if 0 in r:
        pending = os.read(0, 65536)
        if not pending:
            reading, pending = False, b"\x04"
    if pending and (master in w or 0 in r):
        try:
            pending = pending[os.write(master, pending):]
        except BlockingIOError:
            pass
        except OSError:
            pending = b""
    if wake_r in r:
        os.read(wake_r, 512)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
drain()
sys.exit(128 - code if code < 0 else code)
"""


def tty_command(command: Sequence[str]) -> list[str]:
    """``command`` as the leader of a new session whose controlling terminal is its stdin
    (util-linux's ``setsid``, from the host's ``/usr``, which every sandbox sees)."""
    setsid = shutil.which("setsid", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setsid is None:
        raise SandboxError(
            "tty: true needs util-linux's setsid, which is not installed "
            "(scripts/install.sh installs it)",
            reason="CreateContainerError",
        )
    return [setsid, "-w", "-c", *command]


def terminal_of(pid: int) -> str | None:
    """The terminal the container's first process (`TERMINAL`) holds, None without one."""
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/pts/"):
                    return target
    return None


def resize_terminal(path: str, width: int, height: int) -> None:
    """Give the terminal at ``path`` a size; its foreground process group gets SIGWINCH."""
    if width <= 0 or height <= 0:
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        finally:
            os.close(fd)
