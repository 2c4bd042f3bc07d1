"""The test servers' process handling, written once: wait until one answers, stop it."""

from __future__ import annotations

import subprocess
import time
import urllib.request

__all__ = ["stop_process", "wait_answering"]


def wait_answering(proc: subprocess.Popen[bytes], url: str, what: str, timeout_s: float) -> None:
    """Poll ``url`` until it answers; raise RuntimeError (after stopping ``proc``) when ``proc``
    exits first or nothing answers within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
        except OSError:
            time.sleep(0.1)
            continue
        return
    stop_process(proc)
    raise RuntimeError(f"{what} did not answer on {url} in {timeout_s} s")


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 5) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; reaped either way."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
