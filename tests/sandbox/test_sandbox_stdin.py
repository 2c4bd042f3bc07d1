"""A container's stdin, as a runtime keeps it: empty without ``stdin: true``; with it, what
each attach session writes, open across sessions; with ``stdinOnce`` as well, ended by the end
of the first session. (``kubectl attach -i`` and ``kubectl run -i`` over the API: in
tests/executor/test_pod_streams.py.)"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import MODES, make_ctx, make_pod, sh

from kubetrain.local.sandbox import ContainerProcess, PodSandbox
from kubetrain.local.sandbox.enter import write_all

# Echoes each line it reads, then says its input has ended.
ECHO = 'while read -r line; do echo "got $line"; done; echo end of input'


async def _started(sandbox: PodSandbox) -> ContainerProcess:
    deadline = time.monotonic() + 20
    while "main" not in sandbox.processes:
        assert time.monotonic() < deadline, "the container never started"
        await asyncio.sleep(0.02)
    return sandbox.processes["main"]


async def _session(proc: ContainerProcess, data: bytes) -> None:
    """What an attach session with stdin does: open, write, close, end."""
    fd = proc.open_stdin()
    assert fd is not None, "the container has no stdin to write to"
    try:
        await write_all(fd, data)
    finally:
        os.close(fd)
    proc.attach_ended()


async def _log_has(path: Path, text: str) -> None:
    deadline = time.monotonic() + 20
    while text not in (_text(path) if path.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} never reached the log"
        await asyncio.sleep(0.02)


def _text(path: Path) -> str:
    """The log as written (a terminal's CR LF kept)."""
    return path.read_bytes().decode()


def _pod(**container: Any) -> dict[str, Any]:
    return make_pod(containers=[sh(ECHO, **container)])


@pytest.mark.parametrize("mode", MODES)
async def test_without_stdin_the_container_reads_an_empty_input(tmp_path: Path, mode: str) -> None:
    sandbox = PodSandbox(_pod(), make_ctx(tmp_path, mode))
    result = await sandbox.run()
    assert result.containers == {"main": 0}
    assert sandbox.processes["main"].log_path.read_text() == "end of input\n"
    assert sandbox.processes["main"].open_stdin() is None


@pytest.mark.parametrize("mode", MODES)
async def test_stdin_stays_open_across_attach_sessions_and_daemons(
    tmp_path: Path, mode: str
) -> None:
    sandbox = PodSandbox(_pod(stdin=True), make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    try:
        proc = await _started(sandbox)
        await _session(proc, b"one\n")
        await _log_has(proc.log_path, "got one\n")
        # The second through a restarted daemon's view of the container (`adopt`).
        await _session(ContainerProcess.adopt(proc.state), b"two\n")
        await _log_has(proc.log_path, "got two\n")
        # Two sessions have ended: the container still waits for more.
        assert proc.is_alive() and "end of input" not in proc.log_path.read_text()
    finally:
        await sandbox.terminate(grace=2)
        await task


@pytest.mark.parametrize("mode", MODES)
async def test_stdin_once_ends_with_the_first_attach_session(tmp_path: Path, mode: str) -> None:
    sandbox = PodSandbox(_pod(stdin=True, stdinOnce=True), make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    proc = await _started(sandbox)
    await asyncio.sleep(0.3)
    assert proc.is_alive(), "with no session yet, the container must wait for its input"
    await _session(proc, b"only\n")
    result = await asyncio.wait_for(task, 20)
    assert result.containers == {"main": 0}
    assert proc.log_path.read_text() == "got only\nend of input\n"
    assert proc.open_stdin() is None


TERMINAL_CASES = [
    # The terminal echoes what is typed and ends lines with CR LF, as on a node.
    ("stdinOnce: the end of the session is the terminal's end of file", True,
     "tty -s && echo on a terminal; while read -r l; do echo \"got $l\"; done; echo end"),
    ("stdin open: the command ends on its own", False,
     "tty -s && echo on a terminal; read -r l; echo \"got $l\"; echo end"),
]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("once", "script"), [c[1:] for c in TERMINAL_CASES], ids=[c[0] for c in TERMINAL_CASES]
)
async def test_tty_the_container_runs_on_a_terminal_that_attach_types_into(
    tmp_path: Path, mode: str, once: bool, script: str
) -> None:
    pod = make_pod(containers=[sh(script, stdin=True, stdinOnce=once, tty=True)])
    sandbox = PodSandbox(pod, make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    proc = await _started(sandbox)
    await _log_has(proc.log_path, "on a terminal\r\n")
    await _session(proc, b"hi\n")
    result = await asyncio.wait_for(task, 20)
    assert result.containers == {"main": 0}
    assert _text(proc.log_path) == "on a terminal\r\nhi\r\ngot hi\r\nend\r\n"


@pytest.mark.parametrize("mode", MODES)
async def test_tty_a_resize_reaches_the_containers_terminal(tmp_path: Path, mode: str) -> None:
    script = "echo ready; read -r l; stty size"
    pod = make_pod(containers=[sh(script, stdin=True, tty=True)])
    sandbox = PodSandbox(pod, make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    proc = await _started(sandbox)
    await _log_has(proc.log_path, "ready\r\n")
    assert proc.tty
    proc.resize(100, 30)
    await _session(proc, b"\n")
    assert (await asyncio.wait_for(task, 20)).containers == {"main": 0}
    assert _text(proc.log_path).endswith("30 100\r\n")


@pytest.mark.parametrize("mode", MODES)
async def test_tty_a_terminated_container_gets_its_sigterm(tmp_path: Path, mode: str) -> None:
    script = "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.1; done"
    sandbox = PodSandbox(make_pod(containers=[sh(script, tty=True)]), make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    proc = await _started(sandbox)
    await _log_has(proc.log_path, "ready\r\n")
    assert await sandbox.terminate(grace=10) == {"main": 0}
    await task
    # (Every process of the container gets the signal: the shell may report its sleep's end.)
    assert _text(proc.log_path).endswith("bye\r\n")
