"""Upstream's initializer images on the local engine: kubetrain's own initializers.

``ghcr.io/kubeflow/trainer/dataset-initializer`` and ``.../model-initializer`` (any tag) run
``python -m kubetrain.initializers dataset|model`` in the default Python environment, which
speaks the same env contract. An entry for these images in ``images.yaml`` wins, as every
user entry does; one without an ``entrypoint`` gains this one.

Their containers also get a cache shared by every TrainJob of the namespace
(``<home>/cache/initializers/<namespace>``, writable inside the sandbox), so the same object
is fetched once; and their failure is final: the initializer has already retried what a retry
can fix, so its Job fails at once with the container's message instead of starting
replacement pods after a back-off.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.initializers.config import DEFAULT_OUTPUT, Kind
from kubetrain.initializers.main import CACHE_ENV
from kubetrain.local.sandbox import ImageEnv, ImageMap

from .types import Overlay

__all__ = [
    "INITIALIZER_CACHE_DIR",
    "INITIALIZER_IMAGES",
    "initializer_failure",
    "initializer_kind",
    "initializer_overlay",
    "with_initializer_images",
]

# fnmatch patterns, as ImageMap keys are → what the image initializes.
INITIALIZER_IMAGES: Mapping[str, Kind] = {
    "ghcr.io/kubeflow/trainer/dataset-initializer*": "dataset",
    "ghcr.io/kubeflow/trainer/model-initializer*": "model",
}
# Below KUBETRAIN_HOME.
INITIALIZER_CACHE_DIR = Path("cache") / "initializers"


def _entrypoint(kind: Kind) -> tuple[str, ...]:
    # --output names the mount path, so plain mode rewrites it to the volume's host directory.
    return ("python", "-m", "kubetrain.initializers", kind, "--output", DEFAULT_OUTPUT[kind])


def initializer_kind(image: str | None) -> Kind | None:
    for pattern, kind in INITIALIZER_IMAGES.items():
        if image and fnmatch.fnmatchcase(image, pattern):
            return kind
    return None


def with_initializer_images(images: ImageMap) -> ImageMap:
    """``images`` plus entries for the initializer images (the user's entries first)."""
    entries: dict[str, ImageEnv] = {}
    for key, env in images.images.items():
        kind = initializer_kind(key)
        if kind is not None and not env.entrypoint:
            env = replace(env, entrypoint=_entrypoint(kind))
        entries[key] = env
    for pattern, kind in INITIALIZER_IMAGES.items():
        entries.setdefault(pattern, replace(images.default, entrypoint=_entrypoint(kind)))
    return ImageMap(images=entries, default=images.default)


def initializer_overlay(
    pod: Mapping[str, Any], container: Mapping[str, Any], home: Path
) -> Overlay:
    """The shared cache for an initializer container; nothing for any other."""
    if initializer_kind(container.get("image")) is None:
        return Overlay()
    namespace = str(obj_at(pod, "metadata").get("namespace") or "default")
    cache = (home / INITIALIZER_CACHE_DIR / namespace).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    # Bound at its own path, so the env means the same in bwrap and plain mode.
    return Overlay(env={CACHE_ENV: str(cache)}, dirs=((cache, str(cache)),))


def initializer_failure(pod: Mapping[str, Any]) -> bool:
    """True for a failed initializer pod: its failure is final (see the module doc)."""
    containers = dicts(obj_at(pod, "spec").get("containers"))
    return any(initializer_kind(c.get("image")) for c in containers)
