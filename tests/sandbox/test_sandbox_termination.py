"""Termination messages, as the kubelet reports them: the file at terminationMessagePath, or
the log's tail for FallbackToLogsOnError and in plain mode (which has no file to offer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import make_ctx, make_pod, needs_bwrap, sh

from kubetrain.local.sandbox import PodSandbox

CASES = [
    pytest.param(
        "bwrap", {}, "echo 'bucket is gone' > /dev/termination-log; exit 3", "bucket is gone\n",
        id="bwrap: what the container wrote to /dev/termination-log",
        marks=needs_bwrap,
    ),
    pytest.param(
        "bwrap", {"terminationMessagePath": "/tmp/why"}, "echo custom > /tmp/why; exit 1",
        "custom\n", id="bwrap: a terminationMessagePath of its own", marks=needs_bwrap,
    ),
    pytest.param(
        "bwrap", {}, "echo last words; exit 1", "", id="bwrap: no file written, no fallback: none",
        marks=needs_bwrap,
    ),
    pytest.param(
        "bwrap", {"terminationMessagePolicy": "FallbackToLogsOnError"},
        "echo one; echo last words; exit 1", "one\nlast words",
        id="bwrap: FallbackToLogsOnError takes the log's tail", marks=needs_bwrap,
    ),
    pytest.param(
        "plain", {}, "echo last words; exit 1", "last words",
        id="plain: a failed container's log tail stands in for the file",
    ),
    pytest.param(
        "plain", {}, "echo fine", "", id="plain: a container that succeeded has no message",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "extra", "script", "message"), CASES)
async def test_termination_message(
    tmp_path: Path, mode: str, extra: dict[str, str], script: str, message: str
) -> None:
    pod = make_pod(containers=[sh(script, **extra)])
    ctx = make_ctx(tmp_path, mode)
    sandbox = PodSandbox(pod, ctx)
    result = await sandbox.run()
    code = result.containers["main"]
    assert sandbox.termination_message("main", code) == message
