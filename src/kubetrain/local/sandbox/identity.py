"""/etc/passwd and /etc/group for a ``runAsUser`` the host may not know.

Tools look their user up by uid: OpenSSH takes ``~/.ssh`` from the passwd entry, not from
$HOME, and refuses to run for a uid without one. So a sandbox running as uid 1000 gets the
host's files with an entry for that uid added (or replaced by the image mapping's).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_identity"]


def _read(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _has(lines: list[str], key: int) -> bool:
    return any(ln.split(":")[2:3] == [str(key)] for ln in lines)


def _with(lines: list[str], key: int, entry: str) -> list[str]:
    return [ln for ln in lines if ln.split(":")[2:3] != [str(key)]] + [entry]


def write_identity(
    etc: Path, user: tuple[int, int], users: Mapping[int, tuple[str, str]], home: str
) -> list[Path]:
    """Write ``passwd-<uid>`` and ``group-<gid>`` under ``etc``; their paths.

    The image mapping's entry wins over the host's; a uid neither knows becomes
    ``user<uid>`` with the given home.
    """
    uid, gid = user
    mapped = uid in users
    name = users[uid][0] if mapped else f"user{uid}"
    passwd_lines = _read(Path("/etc/passwd"))
    if mapped or not _has(passwd_lines, uid):
        passwd_lines = _with(passwd_lines, uid, f"{name}:x:{uid}:{gid}:{name}:{home}:/bin/bash")
    group_lines = _read(Path("/etc/group"))
    if (mapped and uid == gid) or not _has(group_lines, gid):
        group_name = name if uid == gid else f"group{gid}"
        group_lines = _with(group_lines, gid, f"{group_name}:x:{gid}:")
    passwd, group = etc / f"passwd-{uid}", etc / f"group-{gid}"
    passwd.write_text("\n".join(passwd_lines) + "\n")
    group.write_text("\n".join(group_lines) + "\n")
    return [passwd, group]
