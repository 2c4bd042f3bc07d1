"""Turn one container of a Pod into what to exec: argv, environment, working dir, mounts.

Pure apart from reading the host filesystem for the bwrap plan; nothing is started here.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at

from .context import SandboxContext, SandboxMode
from .envvars import expand, resolve_env
from .errors import SandboxError
from .visibility import image_roots, private_roots
from .volumes import Mount, container_mounts

__all__ = [
    "Launch",
    "base_env",
    "find_container",
    "plan_launch",
    "pod_hostname",
    "run_as",
    "user_home",
]


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one container, before any sandbox wrapping."""

    name: str
    command: list[str]
    env: dict[str, str]
    workdir: str
    hostname: str
    mounts: list[Mount]
    mode: SandboxMode
    warnings: list[str] = field(default_factory=list)
    user: tuple[int, int] | None = None  # runAsUser/runAsGroup, when set
    # bwrap only: host directories put out of sight, and those shown again (`visibility`).
    hidden: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    # ``stdin: true``: the container reads what attach sessions write (its stdin otherwise
    # is empty); ``stdinOnce``: that input ends with the first attach session.
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False  # ``tty: true``: its stdio is a terminal (`terminal.TERMINAL`)


def pod_hostname(pod: Mapping[str, Any]) -> str:
    """``spec.hostname``, else the pod name, cut to a DNS label as the kubelet does."""
    name = str(obj_at(pod, "spec").get("hostname") or obj_at(pod, "metadata").get("name") or "pod")
    return name[:63].rstrip("-.")


def find_container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    spec = obj_at(pod, "spec")
    for c in [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]:
        if c.get("name") == name:
            return dict(c)
    raise SandboxError(f"pod has no container {name!r}")


def run_as(pod: Mapping[str, Any], container: Mapping[str, Any]) -> tuple[int, int] | None:
    """``runAsUser``/``runAsGroup``: the container's securityContext over the pod's.

    Without ``runAsGroup`` the group is the user's own from the host's passwd, else 0, as a
    runtime falls back to the image's passwd and then to root's group.
    """
    pod_sc = obj_at(pod, "spec", "securityContext")
    sc = obj_at(container, "securityContext")
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    if uid is None:
        return None
    gid = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    if gid is None:
        try:
            gid = pwd.getpwuid(int(uid)).pw_gid
        except KeyError:
            gid = 0
    return int(uid), int(gid)


def user_home(uid: int, users: Mapping[int, tuple[str, str]]) -> str:
    """Home of ``uid``: the image mapping's user table first, then the host's passwd."""
    if uid in users:
        return users[uid][1]
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return "/"


def base_env(
    hostname: str, image_path: str, image_env: Mapping[str, str], home: str
) -> dict[str, str]:
    """What every container starts with before its own env: the image's, plus the kubelet's.

    PYTHONUNBUFFERED is ours: logs go to a file, and Python would otherwise buffer them in
    blocks, so ``kubectl logs -f`` would show nothing for minutes.
    """
    env = {"PATH": image_path, "HOME": home, "HOSTNAME": hostname, "PYTHONUNBUFFERED": "1"}
    env.update(image_env)
    return env


def _rewrite_names(value: str, names: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, ip in names:
        value = pattern.sub(ip, value)
    return value


def _path_rewriter(mounts: list[Mount]) -> Callable[[str], str]:
    """Replace mount paths by their host sources in one pass (a replacement is never
    rewritten again); the longest target wins, so /workspace/output beats /workspace."""
    targets = {m.target.rstrip("/") or "/": str(m.source) for m in mounts}
    if not targets:
        return lambda value: value
    alternation = "|".join(re.escape(t) for t in sorted(targets, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w./-])({alternation})(?=/|$|[^\w.-])")
    return lambda value: pattern.sub(lambda m: targets[m.group(1)], value)


def plan_launch(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    ctx: SandboxContext,
    volumes: Mapping[str, Path],
    mode: SandboxMode,
) -> Launch:
    """Resolve env, command and mounts for ``container`` as the kubelet would."""
    name = str(container.get("name", ""))
    hostname = pod_hostname(pod)
    image = ctx.images.resolve(container.get("image"))
    user = run_as(pod, container)
    uid = os.geteuid() if user is None or mode == "plain" else user[0]
    base = base_env(hostname, image.path(), image.env, user_home(uid, image.users))
    if image.is_venv:
        base["VIRTUAL_ENV"] = str(image.prefix)
    # The pod spec's own variables, kept apart in plain mode: only they (and argv) speak of
    # the container's filesystem and names; the base env holds real host paths.
    own = resolve_env(pod, container, ctx)
    warnings: list[str] = []
    if mode == "plain" and ctx.hosts:
        # Without an /etc/hosts of its own the pod cannot resolve its peers' names, so
        # values that name a peer (PET_MASTER_ADDR, JAX_COORDINATOR_ADDRESS=host:port, ...)
        # get the peer's address instead. Names inside scripts are not rewritten.
        names = [
            (re.compile(rf"(?<![\w.-]){re.escape(n)}(?![\w-]|\.\w)"), ip)
            for n, ip in sorted(ctx.hosts.items(), key=lambda kv: -len(kv[0]))
        ]
        own = {k: _rewrite_names(v, names) for k, v in own.items()}
    env = {**base, **own, **ctx.device_env}
    command = [str(c) for c in as_list(container.get("command"))] or list(image.entrypoint)
    args = [str(a) for a in as_list(container.get("args"))]
    if not command and not args:
        raise SandboxError(
            f"container {name!r} has no command: images are local Python environments here "
            "and carry no entrypoint; set 'command' or 'args' (or map the image to an "
            "entrypoint)",
            reason="CreateContainerError",
        )
    # An image without an entrypoint runs its args as the command, as a container runtime does.
    argv = [expand(a, env) for a in [*command, *args]]
    workdir = str(container.get("workingDir") or image.workdir)
    mounts = container_mounts(pod, container, volumes)
    if mode == "plain":
        # No mount namespace: paths below a mountPath are rewritten to the volume's host
        # directory wherever they appear as text in argv, env values and workingDir. A path
        # the program builds itself still misses; `warnings` says so in the log.
        # /tmp is private in a container; here it becomes the pod's own directory, so two
        # pods writing /tmp/train.py (as SDK-style commands do) cannot clobber each other.
        tmp = ctx.pod_dir / "tmp" / name
        tmp.mkdir(parents=True, exist_ok=True)
        rewrite = _path_rewriter([*mounts, Mount(tmp, "/tmp", False)])
        argv = [rewrite(a) for a in argv]
        env = {
            "TMPDIR": str(tmp), **base, **{k: rewrite(v) for k, v in own.items()},
            **ctx.device_env,
        }  # fmt: skip
        workdir = rewrite(workdir)
        for m in mounts:
            if os.path.realpath(m.target) != os.path.realpath(m.source):
                warnings.append(
                    f"plain mode: volume at {m.target} is not mounted; paths below it in "
                    f"command, args and env point to {m.source} instead"
                )
        if user is not None and user[0] != os.geteuid():
            warnings.append(f"plain mode: runAsUser {user[0]} is ignored; running as {uid}")
        if not os.path.isdir(workdir):
            warnings.append(f"plain mode: working dir {workdir} does not exist; using pod dir")
            workdir = str(ctx.pod_dir)
    stdin = container.get("stdin") is True
    once = stdin and container.get("stdinOnce") is True
    tty = container.get("tty") is True
    if mode == "plain":
        return Launch(
            name, argv, env, workdir, hostname, mounts, mode, warnings, stdin=stdin,
            stdin_once=once, tty=tty,
        )  # fmt: skip
    return Launch(
        name, argv, env, workdir, hostname, mounts, mode, warnings, user=user,
        hidden=private_roots(*ctx.engine_dirs()), shown=image_roots(image), stdin=stdin,
        stdin_once=once, tty=tty,
    )  # fmt: skip
