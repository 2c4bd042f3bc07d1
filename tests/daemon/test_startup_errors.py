"""Issue 13, finding 9: a damaged or misconfigured home is one line naming the file and the
cause, at once: no traceback, no minute of waiting, no empty reason."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kubetrain.local.daemon import DaemonError, ensure_daemon
from kubetrain.local.sandbox import SandboxError, load_image_map


def _home_is_a_file(home: Path) -> Path:
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("not a directory\n")
    return home


def _corrupt_database(home: Path) -> Path:
    home.mkdir(parents=True)
    (home / "apiserver.db").write_text("this is not an SQLite database, not even close\n")
    return home / "apiserver.db"


def _bad_engine_config(home: Path) -> Path:
    home.mkdir(parents=True)
    (home / "engine.yaml").write_text("allowedHostPaths: relative/path\n")
    return home / "engine.yaml"


CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("KUBETRAIN_HOME is a file", _home_is_a_file, "KUBETRAIN_HOME must be a directory"),
    ("a corrupt apiserver.db", _corrupt_database, "file is not a database"),
    ("engine.yaml with a wrong setting", _bad_engine_config, "allowedHostPaths must be a list"),
]


@pytest.mark.parametrize(
    ("damage", "cause"), [c[1:] for c in CASES], ids=[f"finding 9: {c[0]}" for c in CASES]
)
def test_finding_9_a_start_up_error_names_the_file_and_the_cause_in_one_line(
    home: Path, damage: Callable[[Path], Path], cause: str
) -> None:
    path = damage(home)
    started = time.monotonic()
    with pytest.raises(DaemonError) as failed:
        ensure_daemon(home, timeout=60)
    message = str(failed.value)
    assert "\n" not in message and "Traceback" not in message
    assert str(path) in message and cause in message
    assert time.monotonic() - started < 30  # not the minute-long wait for readiness


def test_finding_9_a_damaged_daemon_json_is_named_at_once(home: Path) -> None:
    ensure_daemon(home)
    (home / "daemon.json").write_text("garbage{")
    started = time.monotonic()
    with pytest.raises(DaemonError, match=r"daemon\.json: not a daemon description"):
        ensure_daemon(home, timeout=60)
    assert time.monotonic() - started < 5


def test_finding_9_a_broken_images_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "images.yaml"
    path.write_text("images: [\n")
    with pytest.raises(SandboxError, match=f"{path}: not valid YAML"):
        load_image_map(path)


# A daemon whose main thread has ended while another thread still holds the process (and with
# it the lock's file descriptor): the state a failing daemon passes through on a loaded machine.
_LINGERING_DAEMON = """
import ctypes, fcntl, os, sys, threading, time
home = sys.argv[1]
fd = os.open(os.path.join(home, "daemon.lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
with open(os.path.join(home, "daemon.pid"), "w") as fh:
    fh.write(f"{os.getpid()}\\n")
def linger():
    while not os.path.exists(os.path.join(home, "release")):
        time.sleep(0.01)
    os._exit(1)
threading.Thread(target=linger).start()
ctypes.CDLL(None).pthread_exit(None)
"""


@pytest.mark.parametrize(
    ("pid_file_names", "ours"),
    [("the exiting daemon", True), ("another daemon", False)],
    ids=lambda v: str(v),
)
def test_finding_9_a_daemon_whose_threads_still_hold_the_lock_is_still_exiting_not_a_rival(
    tmp_path: Path, pid_file_names: str, ours: bool
) -> None:
    import subprocess
    import sys

    from kubetrain.local.daemon.control import _alive, _exiting
    from kubetrain.local.daemon.files import DaemonFiles, lock_is_held

    files = DaemonFiles(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _LINGERING_DAEMON, str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while _alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(proc.pid) and lock_is_held(files.lock)
        if pid_file_names == "another daemon":
            files.pid.write_text(f"{proc.pid + 1}\n")
        # Ours: the client waits for the lock to go and then reports this daemon's last words
        # (taking it for a rival's won race would wait out the whole timeout for readiness).
        assert _exiting(files, proc.pid) is ours
    finally:
        (tmp_path / "release").touch()
        proc.wait(timeout=30)
    assert not lock_is_held(files.lock)
