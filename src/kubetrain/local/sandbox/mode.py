"""Which sandbox this machine can give a pod, and why: bubblewrap, or plain processes.

Chosen once per process and cached. ``KUBETRAIN_SANDBOX=plain`` forces the fallback (for
debugging, or hosts where bwrap misbehaves); ``=bwrap`` makes an unusable bwrap an error
rather than a silent downgrade.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .context import SandboxMode

__all__ = ["ModeReport", "bwrap_path", "probe_mode", "sandbox_mode", "userns_status"]


@dataclass(frozen=True)
class ModeReport:
    mode: SandboxMode
    reason: str
    bwrap: str | None
    bwrap_version: str | None


def bwrap_path() -> str | None:
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


def userns_status() -> tuple[bool, str]:
    """Whether unprivileged user namespaces are available, from the kernel knobs that gate them."""
    knobs = {
        "/proc/sys/kernel/unprivileged_userns_clone": "0",  # Debian/Ubuntu patch
        "/proc/sys/user/max_user_namespaces": "0",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1",  # Ubuntu 24.04+
    }
    for knob, off in knobs.items():
        try:
            value = Path(knob).read_text().strip()
        except OSError:
            continue
        if value == off:
            return False, f"{knob} is {value}"
    return True, "unprivileged user namespaces allowed"


def _version(bwrap: str) -> str | None:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().removeprefix("bubblewrap ").strip() or None


def probe_mode() -> ModeReport:
    """Try the namespaces a pod needs (uts, pid; user when not root) with a no-op command."""
    forced = os.environ.get("KUBETRAIN_SANDBOX", "").strip().lower()
    bwrap = bwrap_path()
    version = _version(bwrap) if bwrap else None
    if forced == "plain":
        return ModeReport("plain", "forced by KUBETRAIN_SANDBOX=plain", bwrap, version)
    if bwrap is None:
        reason = "bwrap not found (install the 'bubblewrap' package)"
        return _fallback(reason, forced, bwrap, version)
    probe = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             "--unshare-pid", "--unshare-uts", "--hostname", "kubetrain-probe", "true"]  # fmt: skip
    try:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return _fallback(f"bwrap could not run: {err}", forced, bwrap, version)
    if out.returncode != 0:
        detail = out.stderr.strip().splitlines()[-1:] or [f"exit code {out.returncode}"]
        _, userns = userns_status()
        return _fallback(f"bwrap failed: {detail[0]} ({userns})", forced, bwrap, version)
    who = "root" if os.geteuid() == 0 else "an unprivileged user namespace"
    return ModeReport("bwrap", f"bwrap {version or '?'} works as {who}", bwrap, version)


def _fallback(reason: str, forced: str, bwrap: str | None, version: str | None) -> ModeReport:
    if forced == "bwrap":
        raise RuntimeError(f"KUBETRAIN_SANDBOX=bwrap but {reason}")
    return ModeReport("plain", reason, bwrap, version)


@functools.cache
def _cached() -> ModeReport:
    return probe_mode()


def sandbox_mode() -> ModeReport:
    """The mode pods run in on this machine, probed once per process."""
    return _cached()
