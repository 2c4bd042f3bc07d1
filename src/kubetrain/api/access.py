"""Reading loosely typed objects: a field that should be a mapping or a list, or else empty.

Objects arrive as plain JSON; a field may be missing, null or of the wrong type (bad input is
reported by validation, not by a crash while reading it). These two accessors are the one place
that rule is written.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_list"]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
