"""What the caller tells the sandbox about one pod: directories, addresses, data, images.

The executor owns the JobSet: it knows every pod's DNS name and address, the ConfigMaps and
Secrets the pod refers to, and where ``KUBETRAIN_HOME`` lives. It hands that over once, as a
`SandboxContext`, so the sandbox itself never talks to the API server.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .cgroups import CgroupTree

__all__ = [
    "DEFAULT_PATH",
    "ContainerOverlay",
    "ImageEnv",
    "ImageMap",
    "OverlayHook",
    "SandboxContext",
    "SandboxMode",
    "current_image_env",
]

SandboxMode = Literal["bwrap", "plain"]

# The PATH a Debian-based image would have; the image's own bin/ goes in front of it.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageEnv:
    """A local stand-in for a container image.

    ``prefix`` is a venv or installation prefix whose ``bin/`` goes first on PATH. Images have
    no entrypoint locally unless one is named here; ``workdir`` plays the image's WORKDIR;
    ``users`` plays the image's passwd for ``runAsUser``: uid → (name, home), e.g.
    ``{1000: ("mpiuser", "/home/mpiuser")}`` for the MPI runtimes' images.
    """

    prefix: Path
    workdir: str = "/"
    entrypoint: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    users: Mapping[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def is_venv(self) -> bool:
        return (self.prefix / "pyvenv.cfg").is_file()

    def path(self) -> str:
        return f"{self.prefix / 'bin'}:{DEFAULT_PATH}"


def current_image_env() -> ImageEnv:
    """The environment of the interpreter running kubetrain: the default for every image."""
    return ImageEnv(prefix=Path(sys.prefix))


@dataclass(frozen=True)
class ImageMap:
    """Image reference → local environment.

    Keys are exact references or ``fnmatch`` patterns (``pytorch/pytorch:*``), tried in order
    after an exact match; anything unmatched runs in ``default``.
    """

    images: Mapping[str, ImageEnv] = field(default_factory=dict)
    default: ImageEnv = field(default_factory=current_image_env)

    def resolve(self, image: str | None) -> ImageEnv:
        if not image:
            return self.default
        if image in self.images:
            return self.images[image]
        for pattern, env in self.images.items():
            if fnmatch.fnmatchcase(image, pattern):
                return env
        return self.default


class ContainerOverlay(Protocol):
    """Extra read-only files (host file → path in the sandbox) and default env for one
    container: what a framework's image would have shipped (kubetrain.local.frameworks).
    It may also carry ``dirs``: writable host directories (host dir → path in the sandbox)."""

    @property
    def files(self) -> tuple[tuple[Path, str], ...]: ...

    @property
    def env(self) -> Mapping[str, str]: ...


class OverlayHook(Protocol):
    """Called once per container start with the container's resolved env and volumes."""

    def __call__(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        *,
        pod_ip: str,
        env: Mapping[str, str],
        volumes: Mapping[str, Path],
        work_dir: Path,
    ) -> ContainerOverlay: ...


@dataclass(frozen=True)
class SandboxContext:
    """Everything one pod needs from outside itself.

    - ``pod_dir``: per-pod working dir under KUBETRAIN_HOME (volumes, state, generated files).
    - ``log_dir``: logs go to ``<log_dir>/<namespace>/<pod>/<container>.log``.
    - ``pod_ip``: this pod's own loopback address (127.x.y.z).
    - ``hosts``: every pod DNS name of the JobSet → its address (see `hosts.pod_dns_names`).
    - ``services``: Service DNS names (every form) → their endpoints' addresses.
    - ``claims_dir``: PVC ``c`` in namespace ``ns`` lives at ``<claims_dir>/<ns>/<c>``; it
      outlives the pod. Defaults to ``<pod_dir>/../claims``.
    - ``config_maps`` / ``secrets``: name → data; bytes for binaryData and decoded Secret
      data, str for plain ConfigMap data.
    - ``tokens``: audience → service-account token text for projected token sources; the key
      ``""`` serves sources without an audience.
    - ``mode``: force ``"bwrap"`` or ``"plain"``; ``None`` picks what `sandbox_mode` reports.
    - ``die_with_parent``: pass bwrap's ``--die-with-parent``. Off by default because it ties
      every pod to the daemon's life: a restarted daemon could then never adopt a pod.
    - ``enter_netns``: the argv prefix that puts a container into the pod's own network
      namespace (`network.PodNetwork.enter_pod`); empty: the host's network.
    - ``device_env``: the devices assigned to the pod (``CUDA_VISIBLE_DEVICES``, ...); set
      over the container's own env, as a device plugin's are.
    - ``cgroups``: where containers with ``resources.limits`` get their cgroups (None: limits
      are not enforced); ``cgroup_key`` names this engine's subtree in it.
    - ``overlay``: a hook (e.g. ``kubetrain.local.frameworks.pod_overlay``) whose files are
      bound read-only on top of the volumes (bwrap mode) and whose env fills in names the
      container does not set itself (both modes). A file's target must exist already when it
      lies inside a read-only mount (bwrap cannot create a mount point there).
    - ``engine_home``: the engine's ``KUBETRAIN_HOME``; like every home directory and the
      pod, log and claim directories, it is out of a bwrap sandbox's sight (`visibility`).
    """

    pod_dir: Path
    log_dir: Path
    pod_ip: str
    hosts: Mapping[str, str] = field(default_factory=dict)
    services: Mapping[str, Sequence[str]] = field(default_factory=dict)
    claims_dir: Path | None = None
    config_maps: Mapping[str, Mapping[str, bytes | str]] = field(default_factory=dict)
    secrets: Mapping[str, Mapping[str, bytes | str]] = field(default_factory=dict)
    tokens: Mapping[str, str] = field(default_factory=dict)
    images: ImageMap = field(default_factory=ImageMap)
    node_name: str = "kubetrain-local"
    host_ip: str = "127.0.0.1"
    mode: SandboxMode | None = None
    die_with_parent: bool = False
    overlay: OverlayHook | None = None
    enter_netns: tuple[str, ...] = ()
    device_env: Mapping[str, str] = field(default_factory=dict)
    cgroups: CgroupTree | None = None
    cgroup_key: str = "default"
    engine_home: Path | None = None

    def engine_dirs(self) -> tuple[Path, ...]:
        """Where the engine keeps pods, logs, claims and its own files: hidden from pods."""
        claims = self.claims_dir if self.claims_dir is not None else self.pod_dir.parent / "claims"
        home = () if self.engine_home is None else (self.engine_home,)
        return (*home, self.pod_dir.parent, self.log_dir, claims)

    def claim_path(self, namespace: str, claim: str) -> Path:
        root = self.claims_dir if self.claims_dir is not None else self.pod_dir.parent / "claims"
        return root / namespace / claim
