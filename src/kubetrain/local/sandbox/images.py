"""Reading the image → environment mapping from a file (YAML or JSON).

Shape (every field but ``prefix`` optional)::

    default: {prefix: /home/me/project/.venv}
    images:
      "pytorch/pytorch:*": {prefix: /opt/envs/torch, workdir: /workspace}
      "ghcr.io/kubeflow/trainer/deepspeed-runtime:*":
        prefix: /opt/envs/deepspeed
        users: {1000: [mpiuser, /home/mpiuser]}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .context import ImageEnv, ImageMap, current_image_env
from .errors import SandboxError

__all__ = ["image_map_from_dict", "load_image_map"]


def _table(where: str, value: Any) -> Mapping[str, Any]:
    """A mapping of the file ({} when absent or empty); anything else is an error naming it."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise SandboxError(f"{where}: expected a mapping, not {type(value).__name__}")
    return value


def _env(where: str, data: Any) -> ImageEnv:
    if not isinstance(data, Mapping) or "prefix" not in data:
        raise SandboxError(f"{where}: an image entry needs a 'prefix'")
    users = {
        int(uid): (str(entry[0]), str(entry[1]))
        for uid, entry in _table(f"{where}.users", data.get("users")).items()
    }
    return ImageEnv(
        prefix=Path(str(data["prefix"])).expanduser(),
        workdir=str(data.get("workdir") or "/"),
        entrypoint=tuple(str(x) for x in data.get("entrypoint") or ()),
        env={str(k): str(v) for k, v in _table(f"{where}.env", data.get("env")).items()},
        users=users,
    )


def image_map_from_dict(data: Mapping[str, Any]) -> ImageMap:
    given = _table("images", data.get("images"))
    images = {str(k): _env(f"images[{k!r}]", v) for k, v in given.items()}
    default = _env("default", data["default"]) if data.get("default") else current_image_env()
    return ImageMap(images=images, default=default)


def load_image_map(path: Path) -> ImageMap:
    """The mapping in ``path``; the default mapping when the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ImageMap()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise SandboxError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, Mapping):
        raise SandboxError(f"{path}: expected a mapping with 'images' and/or 'default'")
    try:
        return image_map_from_dict(data)
    except (SandboxError, TypeError, ValueError, IndexError) as err:
        raise SandboxError(f"{path}: {err}") from None
