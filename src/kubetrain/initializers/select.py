"""Which files of a source to fetch: ``huggingface_hub``'s pattern rules, used for every source.

A pattern is an ``fnmatch`` glob on the file's path relative to the source (``*`` crosses
``/``); one ending in ``/`` means everything below that folder. A file is fetched when it
matches some allow pattern (or there are none) and no ignore pattern.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

__all__ = ["selected"]


def _norm(patterns: Iterable[str]) -> list[str]:
    return [p + "*" if p.endswith("/") else p for p in patterns]


def selected(path: str, *, allow: Iterable[str] = (), ignore: Iterable[str] = ()) -> bool:
    allow_l, ignore_l = _norm(allow), _norm(ignore)
    if allow_l and not any(fnmatch.fnmatchcase(path, p) for p in allow_l):
        return False
    return not any(fnmatch.fnmatchcase(path, p) for p in ignore_l)
