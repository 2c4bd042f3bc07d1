"""Local-engine support for the framework runtimes: MPI over real sshd between pod
sandboxes, JAX's coordinator on the pod's own address, and clear refusals for what cannot
run here (Flux).

Hooks for the rest of the local engine (nothing here imports the executor):

- `pod_overlay`: the sandbox calls it for each container it starts in bwrap mode and binds
  the returned files / adds the returned env;
- `with_framework_images`: the daemon passes its image map through it, so the MPI runtime
  images run as ``mpiuser`` (uid 1000, home ``/home/mpiuser``) as their real images do;
- `local_refusal`: the executor asks it before starting a pod and fails the pod with its
  message instead of starting something that would hang;
- `with_initializer_images`, `engine_overlay`, `initializer_failure`: upstream's initializer
  images run ``python -m kubetrain.initializers`` with a cache shared across TrainJobs, and
  a failed initializer fails its Job at once (see `initializers`).
"""

from __future__ import annotations

from .images import MPI_IMAGE_PATTERNS, with_framework_images
from .initializers import (
    INITIALIZER_CACHE_DIR,
    INITIALIZER_IMAGES,
    initializer_failure,
    with_initializer_images,
)
from .overlay import engine_overlay, jax_overlay, pod_overlay
from .refusal import REFUSAL_REASON, local_refusal
from .ssh import ssh_overlay
from .types import Overlay

__all__ = [
    "INITIALIZER_CACHE_DIR",
    "INITIALIZER_IMAGES",
    "MPI_IMAGE_PATTERNS",
    "REFUSAL_REASON",
    "Overlay",
    "engine_overlay",
    "initializer_failure",
    "jax_overlay",
    "local_refusal",
    "pod_overlay",
    "ssh_overlay",
    "with_framework_images",
    "with_initializer_images",
]
