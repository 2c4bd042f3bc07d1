"""Built-in image entries for the framework runtimes' images.

The MPI runtimes' images (upstream's deepspeed and mlx runtimes, built on mpi-operator's
base image) carry a user ``mpiuser`` with uid 1000 and home ``/home/mpiuser``; the runtimes
run as that uid and mount the SSH Secret at ``/home/mpiuser/.ssh``. OpenSSH finds its keys
through the passwd entry of the uid, so the local stand-in for those images must name the
same user and home. Everything else about the image (its Python environment) stays what the
user's image map, or the default, says.
"""

from __future__ import annotations

import fnmatch
from dataclasses import replace

from kubetrain.local.sandbox import ImageEnv, ImageMap

__all__ = ["MPI_IMAGE_PATTERNS", "MPI_USER", "with_framework_images"]

# fnmatch patterns, as ImageMap keys are.
MPI_IMAGE_PATTERNS = (
    "ghcr.io/kubeflow/trainer/deepspeed-runtime*",
    "ghcr.io/kubeflow/trainer/mlx-runtime*",
    "mpioperator/*",
)
MPI_USER = {1000: ("mpiuser", "/home/mpiuser")}


def with_framework_images(images: ImageMap) -> ImageMap:
    """``images`` plus entries for the MPI runtime images.

    The user's own entries keep precedence (they come first); one of theirs that matches an
    MPI image but names no users gains ``mpiuser``, since without it sshd and ssh would look
    for keys in the wrong home.
    """
    entries: dict[str, ImageEnv] = {}
    for key, env in images.images.items():
        if not env.users and any(_overlaps(key, p) for p in MPI_IMAGE_PATTERNS):
            env = replace(env, users=dict(MPI_USER))
        entries[key] = env
    for pattern in MPI_IMAGE_PATTERNS:
        entries.setdefault(pattern, replace(images.default, users=dict(MPI_USER)))
    return ImageMap(images=entries, default=images.default)


def _overlaps(key: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(pattern, key)
