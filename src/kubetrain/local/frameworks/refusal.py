"""Pods the local engine cannot run, refused at once with a reason instead of hanging.

The executor asks `local_refusal` before it starts a pod; a non-None answer becomes the
pod's failure message (reason `REFUSAL_REASON`), which fails the Job, the JobSet and so
the TrainJob with that message.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at

from .ssh import MPI_SSH_VOLUME, sshd_config_path

__all__ = ["REFUSAL_REASON", "local_refusal"]

REFUSAL_REASON = "UnsupportedOnLocalEngine"

_FLUX = (
    "the Flux runtime cannot run on the local engine: its pods start the Flux framework "
    "(flux-broker) from the {image!r} init container, and this machine has no Flux; run the "
    "TrainJob on a Kubernetes cluster with Kubeflow Trainer (`kubetrain render -f FILE` shows "
    "the objects it would create)"
)
_PLAIN_MPI = (
    "MPI runtimes need the bubblewrap sandbox (each pod's own hostname, /etc/hosts and mount "
    "points for the hostfile and the SSH keys), but pods run as plain processes here: {why}"
)
_MISSING = (
    "MPI runtimes need {what} on this machine ({path} not found); on Debian or Ubuntu: "
    "apt-get install {package}"
)


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = obj_at(pod, "spec")
    return [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]


def local_refusal(
    pod: Mapping[str, Any], *, sandbox_mode: str = "bwrap", mode_reason: str = ""
) -> str | None:
    """Why ``pod`` (a Pod, or a pod template: anything with a pod ``spec``) cannot run on
    the local engine; None when it can. ``sandbox_mode`` is the sandbox's mode for the pod
    (``"bwrap"`` or ``"plain"``) and ``mode_reason`` why, for the message.
    """
    containers = _containers(pod)
    for c in containers:
        command = [str(a) for a in as_list(c.get("command"))]
        if c.get("name") == "flux-installer" or "/etc/flux-config/entrypoint.sh" in command:
            image = next(
                (x.get("image") for x in containers if x.get("name") == "flux-installer"),
                "flux-view",
            )
            return _FLUX.format(image=image)
    mpi = [
        c
        for c in containers
        if any(m.get("name") == MPI_SSH_VOLUME for m in dicts(c.get("volumeMounts")))
    ]
    if not mpi:
        return None
    if sandbox_mode != "bwrap":
        return _PLAIN_MPI.format(why=mode_reason or "bwrap is not available")
    for c in mpi:
        sshd = sshd_config_path(c)
        if sshd is not None:
            program = str((as_list(c.get("command")) or ["/usr/sbin/sshd"])[0])
            if shutil.which(program) is None:
                return _MISSING.format(what="the OpenSSH server", path=program,
                                       package="openssh-server")  # fmt: skip
        launcher = any(
            e.get("name") == "OMPI_MCA_orte_default_hostfile" for e in dicts(c.get("env"))
        )
        if sshd is None and launcher and shutil.which("ssh") is None:
            return _MISSING.format(what="the OpenSSH client", path="ssh",
                                   package="openssh-client")  # fmt: skip
    return None
