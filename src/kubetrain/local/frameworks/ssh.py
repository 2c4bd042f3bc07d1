"""MPI over real OpenSSH between pod sandboxes: what a pod's image would have supplied.

Design (the choice issue 5 leaves open): every ``node`` pod of an MPI runtime runs its
runtime command unchanged, ``/usr/sbin/sshd -De -f /home/mpiuser/.sshd_config``, and the
launcher's ``mpirun`` reaches it with plain ``ssh <pod>.<subdomain>`` on port 2222, exactly as
on a cluster. Nothing in the TrainJob, the runtime or the rendered JobSet changes. The local
engine only supplies what the runtime images (built on mpi-operator's base image) carry and
this machine lacks:

- the sshd config named by ``-f``: port 2222 *on the pod's own loopback address* (all pods
  share the host's network namespace, so an sshd on 0.0.0.0:2222 would take the port from
  every other pod), the mounted private key as host key, no pid file, and
  ``SetEnv PATH=...`` so commands run over ssh find the image's programs first (sshd starts
  sessions with a fixed system PATH, which would miss the image's Python environment);
- ``/etc/ssh/ssh_config`` for the client: port 2222, no host key checking, no known_hosts
  (the base image ships the same settings; pod keys are fresh per TrainJob);
- the SSH Secret's files owned by someone other than the pod user. On a cluster they belong
  to root (group ``fsGroup``), so OpenSSH accepts the private key at mode 0640. In the
  sandbox's user namespace our own files appear owned by the pod user, and OpenSSH would
  reject a 0640 key as "too open"; as root we give them to ``nobody`` (the mode stays what
  the Secret says); otherwise the key is served as a copy only we can read (0400).

The rejected alternative, an ``OMPI_MCA_plm_rsh_agent`` that enters the target sandbox, would
need a server of our own in every node pod in place of the runtime's sshd: less faithful,
and the readiness probe on port 2222 would test our stand-in instead of sshd.

One OpenMPI detail remains: with ``runLauncherAsNode`` the hostfile names the launcher pod
too. On a cluster mpirun sees that name resolve to an address of one of its interfaces and
starts those ranks itself. Here every pod address lies in 127.0.0.0/8 on ``lo`` without being
an interface address, so mpirun would ssh to the launcher itself, where no sshd runs. For that
one case the launcher gets an rsh agent (``OMPI_MCA_plm_rsh_agent``, only when the pod does
not set one) that runs a command for one of the pod's own names in place and hands every
other host to ``ssh`` with the arguments mpirun gave; mpirun then runs a daemon of its own
for the launcher's ranks, as it would for any other node.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at

from .types import Overlay

__all__ = [
    "MPI_SSH_VOLUME",
    "RSH_AGENT_PATH",
    "SSHD_PORT",
    "client_config",
    "own_names",
    "rsh_agent",
    "ssh_overlay",
    "sshd_config",
    "sshd_config_path",
]

# The volume name upstream's MPI plugin gives the SSH Secret (``<job>-mpi-ssh-auth``).
MPI_SSH_VOLUME = "mpi-ssh-auth"
# mpi-operator's base image (and so upstream's deepspeed/mlx runtimes) serves ssh here; the
# runtimes' readiness probe checks it.
SSHD_PORT = 2222
# Where the launcher's rsh agent appears; a directory of our own, so no real path is shadowed.
RSH_AGENT_PATH = "/etc/kubetrain/mpi-rsh-agent"
# A uid no pod runs as; files it owns look like someone else's (root's, on a cluster).
_NOBODY = 65534


def _mounts(container: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(m.get("name")): str(m.get("mountPath")) for m in dicts(container.get("volumeMounts"))
    }


def sshd_config_path(container: Mapping[str, Any]) -> str | None:
    """The file an sshd container is told to read with ``-f``; None for anything else."""
    argv = [str(a) for a in [*as_list(container.get("command")), *as_list(container.get("args"))]]
    if not argv or PurePosixPath(argv[0]).name != "sshd":
        return None
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-f" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("-f") and len(arg) > 2:
            return arg[2:]
    return None


def sshd_config(listen: str, auth_dir: str, path: str) -> str:
    """An sshd config for a non-root sshd on ``listen``:2222 serving ``auth_dir``'s keys.

    ``path`` is the PATH for sessions (the container's), since sshd would otherwise give
    commands run over ssh only the system directories.
    """
    return "\n".join(
        [
            "# Written by kubetrain's local engine in place of the runtime image's file.",
            f"Port {SSHD_PORT}",
            f"ListenAddress {listen}",
            f"HostKey {auth_dir}/id_rsa",
            f"AuthorizedKeysFile {auth_dir}/authorized_keys",
            # Not root: no privilege separation, no pid file in /run, no PAM.
            "PidFile none",
            "UsePAM no",
            # The key files sit on a read-only mount owned by someone else, as on a cluster.
            "StrictModes no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitUserEnvironment no",
            f"SetEnv PATH={path}",
            "LogLevel ERROR",
            "",
        ]
    )


def client_config() -> str:
    """``/etc/ssh/ssh_config`` with the settings mpi-operator's base image gives its client."""
    lines = ["# Written by kubetrain's local engine in place of the runtime image's file."]
    lines += [
        "Host *",
        f"    Port {SSHD_PORT}",
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "    LogLevel ERROR",
        "    BatchMode yes",
        "",
    ]
    return "\n".join(lines)


# ssh's options that take a value (``-o X``); mpirun puts its rsh args before the host.
_SSH_VALUE_OPTIONS = "BbcDEeFIiJLlmOoPpQRSWw"


def rsh_agent(own_names: Sequence[str]) -> str:
    """The launcher's rsh agent: a command for one of ``own_names`` runs here, in a clean
    environment like an ssh session's; anything else goes to ``ssh`` unchanged."""
    names = " ".join(shlex.quote(n) for n in own_names)
    return f"""#!/bin/bash
# Written by kubetrain's local engine: mpirun's rsh agent in an MPI launcher pod. mpirun does
# not see this pod's own 127.x address as local (it is no interface address), so commands for
# the pod's own names run here instead of over ssh to a pod that has no sshd.
own=({names})
args=("$@")
i=0
while (( i < ${{#args[@]}} )); do
  case ${{args[i]}} in
    -[{_SSH_VALUE_OPTIONS}]) i=$((i + 2)) ;;
    -*) i=$((i + 1)) ;;
    *) break ;;
  esac
done
host=${{args[i]#*@}}
for name in "${{own[@]}}"; do
  if [[ $host == "$name" ]]; then
    exec env -i HOME="$HOME" USER="$USER" LOGNAME="$USER" SHELL=/bin/bash PATH="$PATH" \
      /bin/bash -c "${{args[*]:i+1}}"
  fi
done
exec ssh "$@"
"""


def own_names(pod: Mapping[str, Any], pod_ip: str) -> list[str]:
    """Every name (and the address) under which peers reach ``pod``, as on a cluster's DNS."""
    meta = obj_at(pod, "metadata")
    spec = obj_at(pod, "spec")
    host = str(spec.get("hostname") or meta.get("name") or "")
    names = [host]
    sub = spec.get("subdomain")
    if sub:
        svc = f"{host}.{sub}.{meta.get('namespace') or 'default'}.svc"
        names += [f"{host}.{sub}", svc, f"{svc}.cluster.local"]
    return [*names, pod_ip]


def _own_key_files(volume_dir: Path, work: Path) -> list[tuple[Path, str]]:
    """Make the Secret's files not the pod user's (see module doc); extra binds if needed."""
    extra: list[tuple[Path, str]] = []
    for f in sorted(volume_dir.iterdir()):
        if not f.is_file():
            continue
        if os.geteuid() == 0:
            os.chown(f, _NOBODY, os.getegid())
            continue
        mode = stat.S_IMODE(f.stat().st_mode)
        if mode & 0o077 and f.name == "id_rsa":
            # Not root: we cannot give the file away, so serve a copy only we can read.
            work.mkdir(parents=True, exist_ok=True)
            copy = work / f"private-{f.name}"
            if copy.exists():
                copy.chmod(0o600)
            shutil.copyfile(f, copy)
            copy.chmod(0o400)
            extra.append((copy, f.name))
    return extra


def ssh_overlay(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    pod_ip: str,
    env: Mapping[str, str],
    volumes: Mapping[str, Path],
    work_dir: Path,
) -> Overlay:
    """The files and env one container of an MPI pod needs on the local engine.

    Pure apart from writing under ``work_dir`` (the pod's own directory) and the ownership
    of the SSH Secret volume's files. Containers that do not mount the MPI SSH Secret get an
    empty `Overlay`.
    """
    mounts = _mounts(container)
    auth_dir = mounts.get(MPI_SSH_VOLUME)
    if auth_dir is None or MPI_SSH_VOLUME not in volumes:
        return Overlay()
    work_dir.mkdir(parents=True, exist_ok=True)
    files: list[tuple[Path, str]] = []
    for copy, name in _own_key_files(volumes[MPI_SSH_VOLUME], work_dir / "ssh"):
        files.append((copy, f"{auth_dir.rstrip('/')}/{name}"))
    name = str(container.get("name") or "c")
    client = work_dir / f"{name}-ssh_config"
    client.write_text(client_config())
    files.append((client, "/etc/ssh/ssh_config"))
    target = sshd_config_path(container)
    if target is not None:
        server = work_dir / f"{name}-sshd_config"
        path = env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
        server.write_text(sshd_config(pod_ip, auth_dir.rstrip("/"), path))
        files.append((server, target))
    # Every MPI pod gets the agent: mpirun passes its MCA settings on to the daemons it starts
    # on the nodes, and they refuse to start when the agent's path does not exist there.
    agent = work_dir / f"{name}-rsh-agent"
    agent.write_text(rsh_agent(own_names(pod, pod_ip)))
    agent.chmod(0o755)
    files.append((agent, RSH_AGENT_PATH))
    env_out: dict[str, str] = {}
    if "OMPI_MCA_plm_rsh_agent" not in env and _is_launcher(container):
        env_out["OMPI_MCA_plm_rsh_agent"] = RSH_AGENT_PATH
    return Overlay(files=tuple(files), env=env_out)


def _is_launcher(container: Mapping[str, Any]) -> bool:
    """The MPI plugin points the launcher's OpenMPI at the hostfile; nodes get no such env."""
    return any(
        e.get("name") == "OMPI_MCA_orte_default_hostfile" for e in dicts(container.get("env"))
    )
