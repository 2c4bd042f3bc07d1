"""Upstream's data-cache image on the local engine: kubetrain's cache server.

Its pods run ``head 0.0.0.0 50051`` / ``worker 0.0.0.0 50051`` (the commands the cache
initializer gives them); ``ghcr.io/kubeflow/trainer/data-cache`` (any tag) maps to the default
Python environment with two small scripts first on PATH, ``head`` and ``worker``, that run
``python -m kubetrain.datacache head|worker``. An entry for the image in ``images.yaml`` wins.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kubetrain.local.sandbox import ImageMap

__all__ = ["DATA_CACHE_BIN", "DATA_CACHE_IMAGE", "with_datacache_images"]

DATA_CACHE_IMAGE = "ghcr.io/kubeflow/trainer/data-cache*"
# Inside the installed package, which every pod already sees (it imports kubetrain).
DATA_CACHE_BIN = Path(__file__).resolve().parents[2] / "datacache" / "bin"


def with_datacache_images(images: ImageMap) -> ImageMap:
    """``images`` plus the data-cache image (unless the user mapped it)."""
    if DATA_CACHE_IMAGE in images.images:
        return images
    default = images.default
    env = {**default.env, "PATH": f"{DATA_CACHE_BIN}:{default.path()}"}
    return ImageMap(
        images={**images.images, DATA_CACHE_IMAGE: replace(default, env=env)}, default=default
    )
