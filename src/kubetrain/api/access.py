"""Reading loosely typed objects: a field of the expected type, or else an empty/default value.

Objects arrive as plain JSON; a field may be missing, null or of the wrong type (bad input is
reported by validation, not by a crash while reading it). These accessors are the one place that
rule is written; they only read, never create missing levels (``runtime.podspec.child_obj``
does that for code that edits).

- ``as_dict`` / ``as_list`` / ``as_str`` / ``as_int``: one value, checked;
- ``obj_at(obj, "spec", "template")``: the mapping several levels down, ``{}`` where any level is
  missing or not a mapping; ``list_at(obj, "spec", "replicatedJobs")``: the list at the end of
  such a path, ``[]`` likewise;
- ``dicts(value)``: the mappings of a list, skipping anything else.

A mapping that is there is returned as is (the caller's object, not a copy), so code that edits
what it found edits the object. Decoded JSON objects are dicts, and only dicts are walked into:
``isinstance(x, dict)`` costs a fraction of an ABC check, and these run on every render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_dict", "as_int", "as_list", "as_str", "dicts", "list_at", "obj_at"]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: Any, default: str = "") -> str:
    """``value`` when it is a string, else ``default``."""
    return value if isinstance(value, str) else default


def as_int(value: Any, default: int) -> int:
    """An integer field, ``default`` when absent or not an integer (bools are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def obj_at(obj: Mapping[str, Any] | None, *keys: str) -> dict[str, Any]:
    """The mapping at ``obj[keys[0]][keys[1]]...``; ``{}`` where a level (or ``obj``) is missing."""
    value: Any = obj
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def list_at(obj: Mapping[str, Any] | None, *keys: str) -> list[Any]:
    """The list at ``obj[keys[0]]...[keys[-1]]``; ``[]`` where a level is missing or wrong."""
    value: Any = obj
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else []


def dicts(value: Any) -> list[dict[str, Any]]:
    """The mappings in ``value`` when it is a list (anything else in it skipped), else ``[]``."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
