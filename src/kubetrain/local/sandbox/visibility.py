"""What of the host a pod may see: the engine's home and every home directory are hidden,
the environment its image maps to is shown again.

A pod runs someone else's code (a notebook, a package, a model repo's script). The sandbox
binds the host read-only, so without this a pod could read ``KUBETRAIN_HOME`` (the API
server's admin token, signing keys, the database holding every Secret) and other pods'
directories (their projected tokens). bwrap therefore puts an empty tmpfs over each
*private root* and binds back exactly the directories the container's Python environment
lives in, wherever they are (a venv under ``/tmp`` or ``/root``, pyenv's interpreter under
``/root/.pyenv``, an editable install's source directory).

Plain mode has no mount namespace: nothing here applies there (``kubetrain doctor`` says so).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import sys
from collections.abc import Iterable
from pathlib import Path

from .context import ImageEnv

__all__ = ["image_roots", "private_roots"]

# Home directories of every account: a pod sees none of them.
_HOMES = ("/root", "/home")


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """Existing, distinct paths with those inside another one dropped, in sorted order."""
    out: list[str] = []
    for path in sorted({p for p in paths if p != "/" and os.path.lexists(p)}):
        if not any(path == o or path.startswith(o.rstrip("/") + "/") for o in out):
            out.append(path)
    return tuple(out)


def private_roots(*engine_dirs: Path) -> tuple[str, ...]:
    """Host directories no pod may see: every home, the engine's own directories.

    ``engine_dirs`` are ``KUBETRAIN_HOME`` and whatever else the engine keeps elsewhere (pod,
    log and claim directories), each hidden whole; a pod gets its own volumes at their mount
    paths, never through these.
    """
    homes = [*_HOMES, os.environ.get("HOME") or "/"]
    with contextlib.suppress(KeyError):
        homes.append(pwd.getpwuid(os.geteuid()).pw_dir)
    return _outermost([*(_real(h) for h in homes), *(_real(d) for d in engine_dirs)])


def _base_prefix(prefix: Path) -> str | None:
    """The installation a venv was made from: ``home`` in ``pyvenv.cfg`` is its bin dir."""
    if prefix == Path(sys.prefix):
        return sys.base_prefix
    try:
        lines = (prefix / "pyvenv.cfg").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home":
            return str(Path(_real(value.strip())).parent)
    return None


def _path_entries(prefix: Path) -> list[str]:
    """Directories that ``.pth`` files in the environment put on ``sys.path`` (an editable
    install's source tree), which a pod's Python reads as part of its image."""
    out: list[str] = []
    for pth in sorted(prefix.glob("lib/python*/site-packages/*.pth")):
        try:
            lines = pth.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            line = line.strip()
            if line.startswith("/") and os.path.isdir(line):
                out.append(line)
    return out


def image_roots(image: ImageEnv) -> tuple[str, ...]:
    """Host directories the image's environment needs, each bound back at its own path:
    the prefix, the interpreter's installation behind a venv (``sys.base_prefix``), and the
    source directories its ``.pth`` files name. Nothing else of a hidden root is shown."""
    prefix = Path(_real(image.prefix))
    paths = [str(prefix), *_path_entries(prefix)]
    base = _base_prefix(prefix)
    if base:
        paths.append(_real(base))
    # The interpreter a venv's python links to, should it live apart from its home's parent.
    python = prefix / "bin" / "python"
    if python.exists():
        paths.append(str(Path(_real(python)).parent.parent))
    return _outermost(paths)
