"""JSON in and out through msgspec: several times faster than ``json`` for large lists, for the
embedded API server's writes and answers (on its one event loop) and for the controller's requests.
msgspec comes with lightkube."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec

__all__ = ["DecodeError", "clone", "dumps", "loads"]

DecodeError = (msgspec.DecodeError, ValueError)


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes."""
    try:
        return msgspec.json.encode(obj)
    except TypeError:  # e.g. non-string keys from a YAML body: let json decide
        return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """Parse JSON; raises one of ``DecodeError``."""
    return msgspec.json.decode(data)


def clone(obj: Any) -> Any:
    """A deep copy of JSON data: a msgspec round trip, several times faster than
    ``copy.deepcopy`` on API objects (falls back to it for anything JSON cannot carry)."""
    try:
        return msgspec.json.decode(msgspec.json.encode(obj))
    except (TypeError, msgspec.DecodeError, ValueError):
        return copy.deepcopy(obj)
