"""The single hook the sandbox calls for every container: `pod_overlay`.

Pods on the local engine share the host's network namespace and run on a host that is no
runtime image. Where a framework runtime relies on either (a server bound to every
interface, a file its image ships), the overlay supplies the smallest local stand-in: extra
read-only files and environment names the container does not set itself. A container of no
framework runtime gets an empty `Overlay`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubetrain.local.sandbox import OverlayHook

from .initializers import initializer_overlay
from .ssh import ssh_overlay
from .types import Overlay

__all__ = ["engine_overlay", "jax_overlay", "pod_overlay"]


def jax_overlay(pod_ip: str, env: Mapping[str, str]) -> Overlay:
    """Bind JAX's coordinator to the pod's own address.

    ``jax.distributed.initialize`` on process 0 binds its coordinator service to ``[::]:port``
    unless ``JAX_COORDINATOR_BIND_ADDRESS`` says otherwise. In a pod's own network namespace
    that is harmless; here every pod shares one, and a wildcard bind would collide with any
    other job on the port (29500, which torchrun also uses). The port stays the plugin's.
    """
    address = env.get("JAX_COORDINATOR_ADDRESS")
    if not address or "JAX_COORDINATOR_BIND_ADDRESS" in env or ":" not in address:
        return Overlay()
    port = address.rsplit(":", 1)[1]
    return Overlay(env={"JAX_COORDINATOR_BIND_ADDRESS": f"{pod_ip}:{port}"})


def pod_overlay(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    pod_ip: str,
    env: Mapping[str, str],
    volumes: Mapping[str, Path],
    work_dir: Path,
) -> Overlay:
    """What to add to ``container``'s sandbox (bwrap mode) before it starts.

    - ``pod``/``container``: Kubernetes JSON shape; ``pod_ip``: the pod's loopback address;
    - ``env``: the container's resolved environment (so the overlay never overrides it);
    - ``volumes``: volume name → host path, as the sandbox prepared them;
    - ``work_dir``: a directory of the pod's own where generated files may be written.

    Caller's side: bind each ``files`` entry read-only at its target (after the volumes, so a
    file may sit on top of one) and add ``env`` to the container's environment.
    """
    return ssh_overlay(
        pod, container, pod_ip=pod_ip, env=env, volumes=volumes, work_dir=work_dir
    ) + jax_overlay(pod_ip, env)


def engine_overlay(home: Path) -> OverlayHook:
    """`pod_overlay` plus what needs the engine's home: the initializers' shared cache."""

    def hook(
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        *,
        pod_ip: str,
        env: Mapping[str, str],
        volumes: Mapping[str, Path],
        work_dir: Path,
    ) -> Overlay:
        return pod_overlay(
            pod, container, pod_ip=pod_ip, env=env, volumes=volumes, work_dir=work_dir
        ) + initializer_overlay(pod, container, home)

    return hook
