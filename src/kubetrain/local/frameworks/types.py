"""The one value the local engine's framework support hands to the sandbox."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Overlay"]


@dataclass(frozen=True)
class Overlay:
    """What to add to one container's sandbox before it starts.

    ``files``: host file → absolute path in the sandbox, bound read-only over whatever the
    sandbox has there (a host file, or a file of a volume). ``env``: names the container does
    not set itself; the container's own values always win. ``dirs``: host directory → path in
    the sandbox, bound writable (a cache shared across pods).
    """

    files: tuple[tuple[Path, str], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    dirs: tuple[tuple[Path, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.env or self.dirs)

    def __add__(self, other: Overlay) -> Overlay:
        return Overlay(
            files=self.files + other.files,
            env={**self.env, **other.env},
            dirs=self.dirs + other.dirs,
        )
