"""The bubblewrap command line for one container.

Filesystem, in the order bwrap applies it:

1. a tmpfs root; every top-level host entry bound read-only (symlinks recreated), except
   ``/proc`` (fresh, for the new PID namespace), ``/dev`` (bwrap's minimal one, plus any GPU
   device nodes), and ``/tmp`` and ``/run`` (private tmpfs, as in a container);
2. directories that must gain a mount point that does not exist on the host (``/home`` for
   ``/home/mpiuser/.ssh``, ``/etc`` for ``/etc/mpi``) are *split*: a tmpfs at that place with
   each host child bound back in, so bwrap can create the missing directory on the tmpfs
   while the host stays untouched;
3. an empty tmpfs over each *hidden* host directory (the engine's home, every home
   directory: `visibility.private_roots`), and the *shown* directories (the image's
   environment: `visibility.image_roots`) bound back read-only where they lie inside a hidden
   directory, a private tmpfs or a volume (`shown_binds`);
4. volumes at their mount paths, parents before children, and the generated
   ``/etc/hosts`` and ``/etc/hostname``.

Mount paths are resolved through host symlinks first (``/var/run`` → ``/run``): bwrap
creates mount points under its new root, where an absolute symlink would point back to the
host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from .volumes import Mount

__all__ = ["DEFAULT_CAPS", "PRIVATE_TMPFS", "bwrap_argv", "canonical_target", "shown_binds"]

# Fresh, writable, per-sandbox directories, as a container has them.
PRIVATE_TMPFS = ("/tmp", "/run")
_SPECIAL = {"/proc", "/dev", *PRIVATE_TMPFS}

# The capabilities a container runtime grants by default. Only matters when bwrap runs as
# real root, where it would otherwise keep every capability and the workload could remount
# the read-only host.
DEFAULT_CAPS = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT",
    "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP",
)  # fmt: skip


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def canonical_target(target: str, hidden: Sequence[str] = ()) -> str:
    """``target`` with host symlinks resolved in the part that exists on the host.

    Resolution stops at the private tmpfs directories and at ``hidden`` ones: what lies below
    them on the host is not what the sandbox sees.
    """
    opaque = [*_SPECIAL, *hidden]
    parts = PurePosixPath(os.path.normpath(target)).parts[1:]
    current = "/"
    for i, part in enumerate(parts):
        nxt = os.path.join(current, part)
        if nxt in opaque or not os.path.lexists(nxt):
            return os.path.join(nxt, *parts[i + 1 :])
        current = os.path.realpath(nxt)
        if any(_under(current, s) for s in opaque):
            return os.path.join(current, *parts[i + 1 :])
    return current


def _masks(hidden: Sequence[str]) -> list[str]:
    """The hidden directories that get an empty tmpfs, shallowest first."""
    return sorted(
        (h for h in hidden if not any(_under(h, s) for s in _SPECIAL)),
        key=lambda h: len(PurePosixPath(h).parts),
    )


def shown_binds(shown: Sequence[str], mounts: Sequence[Mount], hidden: Sequence[str]) -> list[str]:
    """The ``shown`` directories bound back at their own paths: those a hidden directory, a
    private tmpfs or a writable volume above them would otherwise cover.

    The image's environment is the image's, not the volume's: an ``emptyDir`` at ``/tmp``
    must not take away a venv that lives under the host's ``/tmp`` (bwrap makes the mount
    point inside that volume, as for any nested mount). A volume at the very path, or a
    read-only one above it (where no mount point can be made), wins.
    """
    masks = _masks(hidden)
    volumes = [(canonical_target(m.target, masks), m.read_only) for m in mounts]
    out = []
    for path in shown:
        if any(path == t or (ro and _under(path, t)) for t, ro in volumes):
            continue
        if any(_under(path, c) for c in [*masks, *PRIVATE_TMPFS, *(t for t, _ in volumes)]):
            out.append(path)
    return out


def _splits(targets: Sequence[str], hidden: Sequence[str] = ()) -> set[str]:
    """Host directories that must become writable so missing mount points can be made."""
    out: set[str] = set()
    for t in targets:
        # A hidden directory is a writable tmpfs already: mount points are made there.
        if os.path.lexists(t) or any(_under(t, s) for s in [*_SPECIAL, *hidden]):
            continue
        # Inside another mount: bwrap creates the point in that volume, as a runtime would.
        if any(o != t and _under(t, o) for o in targets):
            continue
        parent = os.path.dirname(t)
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if parent != "/":
            out.add(parent)
    return out


def _bind_children(
    directory: str, splits: set[str], skip: set[str], args: list[str], done: set[str]
) -> None:
    """Bind ``directory``'s host children read-only into the sandbox (recreating symlinks)."""
    done.add(directory)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if path in skip or path in _SPECIAL:
            continue  # a hidden directory is skipped too: its tmpfs makes the mount point
        if path in splits:
            args += ["--tmpfs", path]
            _bind_children(path, splits, skip, args, done)
        elif os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]


def _gpu_devices() -> list[str]:
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    devs = [f"/dev/{n}" for n in sorted(names) if n.startswith("nvidia")]
    if os.path.isdir("/dev/dri"):
        devs.append("/dev/dri")
    return devs


def bwrap_argv(
    bwrap: str,
    *,
    hostname: str,
    mounts: Iterable[Mount],
    workdir: str,
    command: Sequence[str],
    status_fd: int | None = None,
    die_with_parent: bool = False,
    user: tuple[int, int] | None = None,
    hidden: Sequence[str] = (),
    shown: Sequence[str] = (),
    as_root: bool | None = None,
) -> list[str]:
    """The full argv: ``bwrap <options> -- <command...>``.

    ``hidden``: host directories replaced by an empty tmpfs; ``shown``: host directories
    bound back read-only at their own paths (real paths both, see `visibility`).
    ``as_root``: bwrap will run as root (default: when we are), really or in a user namespace,
    and must drop capabilities to a container's default set.
    """
    masks = _masks(hidden)
    mounts = list(mounts)
    binds = [(m, canonical_target(m.target, masks)) for m in mounts]
    binds += [(Mount(Path(p), p, True), p) for p in shown_binds(shown, mounts, hidden)]
    # Resolv.conf that points into a private tmpfs (systemd-resolved) would dangle.
    resolv = os.path.realpath("/etc/resolv.conf")
    own_resolv = any(t == resolv for _, t in binds)  # the pod network's own
    if any(_under(resolv, s) for s in PRIVATE_TMPFS) and os.path.isfile(resolv) and not own_resolv:
        binds.append((Mount(Path(resolv), resolv, True), resolv))
    targets = [t for _, t in binds]
    # A working dir that exists nowhere is made, as a container runtime makes it.
    cwd = canonical_target(workdir, masks)
    absent = not os.path.lexists(cwd) or any(_under(cwd, h) for h in masks)
    make_cwd = absent and not any(_under(cwd, t) for t in [*targets, *_SPECIAL])
    splits = _splits([*targets, cwd] if make_cwd else targets, masks)
    args = [bwrap]
    done: set[str] = set()
    _bind_children("/", splits, {*targets, *masks}, args, done)
    # Splits below a directory that was bound whole go on top of that bind, shallowest first.
    for split in sorted(splits - done, key=lambda s: len(PurePosixPath(s).parts)):
        if split not in done:
            args += ["--tmpfs", split]
            _bind_children(split, splits, {*targets, *masks}, args, done)
    args += ["--proc", "/proc", "--dev", "/dev"]
    for dev in _gpu_devices():
        args += ["--dev-bind-try", dev, dev]
    for tmp in PRIVATE_TMPFS:
        args += ["--tmpfs", tmp]
    for mask in masks:
        args += ["--tmpfs", mask]
    for mount, target in sorted(binds, key=lambda b: len(PurePosixPath(b[1]).parts)):
        args += ["--ro-bind" if mount.read_only else "--bind", str(mount.source), target]
    if make_cwd:
        args += ["--dir", cwd]
    args += ["--unshare-pid", "--unshare-uts", "--hostname", hostname, "--chdir", workdir]
    if user is not None:
        # A user namespace maps the requested ids onto ours: the process sees uid/gid
        # ``user`` and owns, on the host, what we own.
        args += ["--unshare-user", "--uid", str(user[0]), "--gid", str(user[1])]
    if os.geteuid() == 0 if as_root is None else as_root:
        args += ["--cap-drop", "ALL"]
        # A non-root container user gets no effective capabilities from a runtime either.
        if user is None or user[0] == 0:
            for cap in DEFAULT_CAPS:
                args += ["--cap-add", cap]
    if die_with_parent:
        args.append("--die-with-parent")
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    return [*args, "--", *command]
