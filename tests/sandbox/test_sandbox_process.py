"""Container processes: exit codes, logs, restarts, ordering, termination without orphans."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from sandbox_support import MODES, live_pids_with, make_ctx, make_pod, run, sh

from kubetrain.local.sandbox import PodSandbox, SandboxError


def _marker() -> str:
    return f".{uuid.uuid4().int % 10**9:09d}"


EXIT_CASES = [
    ("a clean exit is 0", "exit 0", 0),
    ("an exit code is passed through", "exit 3", 3),
    # $$ is Kubernetes' escape for $, so the shell's own $$ is written $$$$.
    ("death by SIGKILL reads as 137", "kill -9 $$$$", 137),
    ("a program that does not exist inside the shell is 127", "no-such-program-xyz", 127),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("script", "code"), [c[1:] for c in EXIT_CASES], ids=[c[0] for c in EXIT_CASES]
)
async def test_exit_codes(tmp_path: Path, mode: str, script: str, code: int) -> None:
    result, _ = await run(make_pod(containers=[sh(script)]), make_ctx(tmp_path, mode))
    assert result.containers == {"main": code}


@pytest.mark.parametrize("mode", MODES)
async def test_a_missing_executable_is_a_start_error(tmp_path: Path, mode: str) -> None:
    pod = make_pod(containers=[{"name": "main", "command": ["no-such-program-xyz"]}])
    with pytest.raises(SandboxError, match='exec: "no-such-program-xyz"') as err:
        await run(pod, make_ctx(tmp_path, mode))
    assert err.value.reason == "RunContainerError"


@pytest.mark.parametrize("mode", MODES)
async def test_logs_stream_while_the_container_runs(tmp_path: Path, mode: str) -> None:
    # Python without -u and a sleep between lines: only an unbuffered stream shows line 1 early.
    pod = make_pod(containers=[{"name": "main", "command": ["python", "-c",
        "import time; print('first', flush=False); time.sleep(1.5); print('second')"]}])  # fmt: skip
    ctx = make_ctx(tmp_path, mode)
    sandbox = PodSandbox(pod, ctx)
    task = asyncio.create_task(sandbox.run())
    log = ctx.log_dir / "default" / "p" / "main.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "first" not in (log.read_text() if log.exists() else ""):
        await asyncio.sleep(0.05)
    assert log.read_text().split()[-1:] == ["first"], (
        "the first line must be there before the second"
    )
    assert (await task).containers == {"main": 0}
    assert log.read_text().split()[-2:] == ["first", "second"]


@pytest.mark.parametrize("mode", MODES)
async def test_on_failure_restarts_in_place_and_keeps_each_runs_log(
    tmp_path: Path, mode: str
) -> None:
    script = "n=$(cat /s/n 2>/dev/null || echo 0); echo run $n; echo $((n+1)) > /s/n; [ $n -ge 2 ]"
    pod = make_pod(containers=[sh(script, volumeMounts=[{"name": "s", "mountPath": "/s"}])],
                   volumes=[{"name": "s", "emptyDir": {}}], restartPolicy="OnFailure")  # fmt: skip
    ctx = make_ctx(tmp_path, mode)
    events: list[tuple[str, int, int | None]] = []
    result, _ = await run(
        pod,
        ctx,
        backoff=0.01,
        on_event=lambda e: events.append((e.kind, e.restart_count, e.exit_code)),
    )
    assert result.containers == {"main": 0}
    assert result.restarts == {"main": 2}
    assert events == [("started", 0, None), ("exited", 0, 1), ("started", 1, None), ("exited", 1, 1),
                      ("started", 2, None), ("exited", 2, 0)]  # fmt: skip
    logdir = ctx.log_dir / "default" / "p"
    assert [
        (logdir / f).read_text().split()[-1] for f in ("main.0.log", "main.1.log", "main.log")
    ] == ["0", "1", "2"]


@pytest.mark.parametrize("mode", MODES)
async def test_init_containers_run_in_order_and_a_failure_stops_the_pod(
    tmp_path: Path, mode: str
) -> None:
    mount = [{"name": "s", "mountPath": "/s"}]
    pod = make_pod(
        init=[sh("echo one >> /s/order", name="first", volumeMounts=mount),
              sh("echo two >> /s/order; exit 4", name="second", volumeMounts=mount)],
        containers=[sh("echo main >> /s/order", volumeMounts=mount)],
        volumes=[{"name": "s", "emptyDir": {}}],
    )  # fmt: skip
    ctx = make_ctx(tmp_path, mode)
    result, _ = await run(pod, ctx)
    assert result.init_containers == {"first": 0, "second": 4}
    assert result.containers == {}
    assert not result.succeeded
    assert (ctx.pod_dir / "volumes" / "s" / "order").read_text().split() == ["one", "two"]


@pytest.mark.parametrize("mode", MODES)
async def test_containers_of_a_pod_run_side_by_side(tmp_path: Path, mode: str) -> None:
    # Each waits for the other's file: only concurrent containers can both finish.
    mount = [{"name": "s", "mountPath": "/s"}]
    wait_for = "for i in $(seq 100); do [ -e /s/{0} ] && exit 0; sleep 0.05; done; exit 1"
    pod = make_pod(
        containers=[sh("touch /s/a; " + wait_for.format("b"), name="a", volumeMounts=mount),
                    sh("touch /s/b; " + wait_for.format("a"), name="b", volumeMounts=mount)],
        volumes=[{"name": "s", "emptyDir": {}}],
    )  # fmt: skip
    result, _ = await run(pod, make_ctx(tmp_path, mode))
    assert result.containers == {"a": 0, "b": 0}


@pytest.mark.parametrize("mode", MODES)
async def test_terminate_leaves_no_process_behind(tmp_path: Path, mode: str) -> None:
    # A new session (as torchrun gives its workers), a double fork that leaves the tree, and
    # a plain child; the main process ignores SIGTERM, so SIGKILL must end everything.
    marker = _marker()  # a unique sleep length identifies these processes in /proc
    script = (f"setsid sleep 30{marker} & (sleep 31{marker} &); sleep 32{marker} & "
              "trap '' TERM; while :; do sleep 0.1; done")  # fmt: skip
    sandbox = PodSandbox(make_pod(containers=[sh(script)]), make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run())
    deadline = time.monotonic() + 10
    # The three sleeps, plus the shell (and bwrap) whose command line holds the script.
    while len(live_pids_with(marker)) < 4 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert len(live_pids_with(marker)) >= 4
    started = time.monotonic()
    codes = await sandbox.terminate(grace=0.5)
    assert time.monotonic() - started < 5
    assert codes == {"main": 137}
    assert (await task).terminated
    assert live_pids_with(marker) == []
    assert not sandbox.is_alive()


@pytest.mark.parametrize("mode", MODES)
async def test_terminate_lets_a_polite_process_finish_within_grace(
    tmp_path: Path, mode: str
) -> None:
    script = "trap 'echo stopping; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    ctx = make_ctx(tmp_path, mode)
    sandbox = PodSandbox(make_pod(containers=[sh(script)]), ctx)
    task = asyncio.create_task(sandbox.run())
    log = ctx.log_dir / "default" / "p" / "main.log"
    while "ready" not in (log.read_text() if log.exists() else ""):
        await asyncio.sleep(0.05)
    assert await sandbox.terminate(grace=10) == {"main": 0}
    assert (await task).containers == {"main": 0}
    assert log.read_text().split()[-1] == "stopping"


@pytest.mark.parametrize("mode", MODES)
async def test_a_restarted_daemon_adopts_then_stops_a_running_pod(
    tmp_path: Path, mode: str
) -> None:
    marker = _marker()
    pod = make_pod(containers=[sh(f"exec sleep 30{marker}")])
    ctx = make_ctx(tmp_path, mode)
    first = PodSandbox(pod, ctx)
    await first.start_container("main")
    # A new daemon knows only the Pod and its directory.
    adopted = PodSandbox.adopt(pod, ctx)
    assert list(adopted.processes) == ["main"]
    assert adopted.is_alive()
    assert await adopted.terminate(grace=2) == {"main": 143}
    assert live_pids_with(marker) == []
    await first.wait()  # reap our own child, as the old daemon's exit would have


@pytest.mark.parametrize("mode", MODES)
async def test_an_adopted_container_that_ended_reports_its_real_exit_code(
    tmp_path: Path, mode: str
) -> None:
    pod = make_pod(containers=[sh("exit 5")])
    ctx = make_ctx(tmp_path, mode)
    first = PodSandbox(pod, ctx)
    await first.start_container("main")
    await first.wait()
    adopted = PodSandbox.adopt(pod, ctx)
    assert not adopted.is_alive()
    assert await adopted.wait() == {"main": 5}
    assert adopted.processes["main"].exit_known


@pytest.mark.parametrize("mode", MODES)
async def test_terminate_cuts_a_restart_backoff_short(tmp_path: Path, mode: str) -> None:
    pod = make_pod(containers=[sh("exit 1")], restartPolicy="OnFailure")
    sandbox = PodSandbox(pod, make_ctx(tmp_path, mode))
    task = asyncio.create_task(sandbox.run(backoff=60))
    while "main" not in sandbox.processes or sandbox.processes["main"].exit_code is None:
        await asyncio.sleep(0.02)
    started = time.monotonic()
    await sandbox.terminate(grace=1)
    result = await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - started < 2
    assert result.terminated
    assert result.containers == {"main": 1}
    assert result.restarts == {"main": 0}


@pytest.mark.parametrize("mode", MODES)
async def test_a_sidecar_runs_beside_the_containers_and_is_stopped_after_them(
    tmp_path: Path, mode: str
) -> None:
    mount = [{"name": "s", "mountPath": "/s"}]
    pod = make_pod(
        init=[sh("touch /s/up; while :; do sleep 0.05; done", name="proxy", restartPolicy="Always",
                 volumeMounts=mount)],
        containers=[sh("for i in $(seq 100); do [ -e /s/up ] && exit 0; sleep 0.05; done; exit 1",
                       volumeMounts=mount)],
        volumes=[{"name": "s", "emptyDir": {}}],
        terminationGracePeriodSeconds=1,
    )  # fmt: skip
    result, _ = await run(pod, make_ctx(tmp_path, mode))
    assert result.containers == {"main": 0}
    assert result.sidecars == {"proxy": 143}
    assert result.succeeded


@pytest.mark.parametrize("mode", MODES)
async def test_a_daemon_left_behind_dies_with_its_container(tmp_path: Path, mode: str) -> None:
    # A new session whose parent exits at once: it escapes both the process group and the
    # tree, and only the PID namespace (bwrap) or the subreaper (plain) can still reach it.
    marker = _marker()
    script = f"setsid sh -c 'sleep 30{marker}' < /dev/null > /dev/null 2>&1 & exit 0"
    result, _ = await run(make_pod(containers=[sh(script)]), make_ctx(tmp_path, mode))
    assert result.containers == {"main": 0}
    deadline = time.monotonic() + 3
    while live_pids_with(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert live_pids_with(marker) == []
