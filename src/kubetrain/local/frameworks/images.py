"""Built-in image entries for the framework runtimes' images.

The MPI runtimes' images (upstream's deepspeed and mlx runtimes, built on mpi-operator's
base image) carry a user ``mpiuser`` with uid 1000 and home ``/home/mpiuser``; the runtimes
run as that uid and mount the SSH Secret at ``/home/mpiuser/.ssh``. OpenSSH finds its keys
through the passwd entry of the uid, so the local stand-in for those images must name the
same user and home. Everything else about the image (its Python environment) stays what the
user's image map, or the default, says.

kubetrain's own controller image (the install manifests' Deployment) runs ``kubetrain
controller``, its Dockerfile's ENTRYPOINT, in the default environment, so ``kubectl apply -k
manifests/`` runs the controller as a pod here as it would on a cluster.
"""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from kubetrain.controller.deploy import IMAGE
from kubetrain.local.sandbox import ImageEnv, ImageMap

__all__ = [
    "CONTROLLER_ENTRYPOINT",
    "CONTROLLER_IMAGE_PATTERN",
    "MPI_IMAGE_PATTERNS",
    "MPI_USER",
    "with_framework_images",
]

# fnmatch patterns, as ImageMap keys are.
MPI_IMAGE_PATTERNS = (
    "ghcr.io/kubeflow/trainer/deepspeed-runtime*",
    "ghcr.io/kubeflow/trainer/mlx-runtime*",
    "mpioperator/*",
)
MPI_USER = {1000: ("mpiuser", "/home/mpiuser")}
CONTROLLER_IMAGE_PATTERN = f"{IMAGE}*"
CONTROLLER_ENTRYPOINT = ("kubetrain", "controller")  # the Dockerfile's ENTRYPOINT


def with_framework_images(images: ImageMap) -> ImageMap:
    """``images`` plus entries for the MPI runtime images and the controller image.

    The user's own entries keep precedence (they come first); one of theirs that matches an
    MPI image but names no users gains ``mpiuser``, since without it sshd and ssh would look
    for keys in the wrong home; one that matches the controller image but names no entrypoint
    gains ``kubetrain controller``.
    """
    entries: dict[str, ImageEnv] = {}
    for key, env in images.images.items():
        if not env.users and any(_overlaps(key, p) for p in MPI_IMAGE_PATTERNS):
            env = replace(env, users=dict(MPI_USER))
        if not env.entrypoint and _overlaps(key, CONTROLLER_IMAGE_PATTERN):
            env = replace(env, entrypoint=CONTROLLER_ENTRYPOINT)
        entries[key] = env
    for pattern in MPI_IMAGE_PATTERNS:
        entries.setdefault(pattern, replace(images.default, users=dict(MPI_USER)))
    entries.setdefault(
        CONTROLLER_IMAGE_PATTERN, replace(images.default, entrypoint=CONTROLLER_ENTRYPOINT)
    )
    return ImageMap(images=entries, default=images.default)


def _overlaps(key: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(pattern, key)
