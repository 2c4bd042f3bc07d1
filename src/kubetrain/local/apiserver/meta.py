"""ObjectMeta rules: server-set fields, names, labels, and managedFields bookkeeping."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api.access import as_dict, dicts
from kubetrain.api.objectmeta import MAX_ANNOTATIONS_BYTES, validate_metadata
from kubetrain.local.apiserver.patching import fields_v1, leaf_paths, paths_from_fields_v1

__all__ = [
    "MAX_ANNOTATIONS_BYTES",
    "SERVER_FIELDS",
    "content_paths",
    "generate_name",
    "manager_paths",
    "new_uid",
    "now_iso",
    "owned_fields",
    "record_manager",
    "spec_part",
    "validate_metadata",
]

# metadata fields only the server sets; a client's values are replaced or kept from the old object.
SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
)

# The alphabet Kubernetes uses for generateName suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_iso() -> str:
    """The current time as Kubernetes writes timestamps (seconds, UTC, ``Z``)."""
    global _last_second
    second = int(time.time())
    if second != _last_second[0]:
        # Formatted once a second: every write asks, often many times a second.
        _last_second = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _last_second[1]


_last_second: tuple[int, str] = (-1, "")


class _RandomBytes:
    """16 bytes of ``os.urandom`` at a time, read from the OS 4 KiB at a time.

    ``os.urandom`` lets go of the GIL for its system call, and a serving process has other
    threads (the SQLite writer): taking the GIL back then waits for them, up to the switch
    interval (5 ms), which made one uid cost a millisecond under load instead of 2 µs."""

    _CHUNK = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()
        # A forked child must not hand out the parent's bytes again.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._buffer = b""
        self._at = 0

    def take16(self) -> bytes:
        with self._lock:
            if self._at >= len(self._buffer):
                self._buffer, self._at = os.urandom(self._CHUNK), 0
            at = self._at
            self._at = at + 16
            return self._buffer[at : at + 16]


_random_bytes = _RandomBytes()


def new_uid() -> str:
    """A random (version 4) UUID as text, as kube-apiserver gives every new object.

    Spelled from 16 random bytes directly: ``str(uuid.uuid4())`` builds a UUID object on the
    way, about three times the CPU (every write and webhook call takes one)."""
    h = _random_bytes.take16().hex()
    # Version nibble 4; variant bits 10 (the nibble is 8, 9, a or b), as RFC 9562 sets them.
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def generate_name(prefix: str, rng: Callable[[], random.Random] = random.Random) -> str:
    """``prefix`` plus five random characters, as Kubernetes' name generator does."""
    r = rng()
    return prefix + "".join(r.choice(_SUFFIX_ALPHABET) for _ in range(5))


def spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What generation tracks: everything but metadata, status and the type fields."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


_UNOWNED_META = frozenset({"name", "namespace", "generateName", *SERVER_FIELDS})


def content_paths(obj: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The field paths a manager can own in ``obj`` (type and server fields excluded)."""
    out = set()
    for path in leaf_paths(dict(obj)):
        if path[0] in ("apiVersion", "kind"):
            continue
        if path[0] == "metadata" and (len(path) < 2 or path[1] in _UNOWNED_META):
            continue
        out.add(path)
    return out


_ABSENT = object()


def changed_paths(new: Mapping[str, Any], old: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """The `content_paths` of ``new`` whose value ``old`` does not have: what an Update
    records for its manager. Equal subtrees are skipped whole (a status write does not walk
    the spec)."""
    out: set[tuple[str, ...]] = set()
    _diff(new, old, (), out)
    return {
        p
        for p in out
        if p[0] not in ("apiVersion", "kind")
        and not (p[0] == "metadata" and (len(p) < 2 or p[1] in _UNOWNED_META))
    }


def _diff(new: Mapping[str, Any], old: Any, prefix: tuple[str, ...], out: set[Any]) -> None:
    for key, value in new.items():
        before = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
        if value is before or value == before:
            continue
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            if before is not _ABSENT and not (isinstance(before, dict) and before):
                out.add(path)  # a leaf of ``old`` (a value, a list, {}) that became a map
            _diff(value, before, path, out)
        elif value is not None or not (before is _ABSENT or (isinstance(before, dict) and before)):
            # A null is a change only where ``old`` has a leaf (a value, a list, {}) to change.
            out.add(path)


def _fields(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {f"f:{k}": _fields(v) for k, v in value.items()}
    return {}


def owned_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``fieldsV1`` for every field of ``obj`` a manager can own, in one pass (used on create)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, Mapping):
            owned = {f"f:{k}": _fields(v) for k, v in value.items() if k not in _UNOWNED_META}
            if owned:
                out["f:metadata"] = owned
            continue
        out[f"f:{key}"] = _fields(value)
    return out


_ANY = object()


def manager_paths(
    meta: Mapping[str, Any],
    operation: str | None = None,
    exclude: str | None = None,
    subresource: Any = _ANY,
) -> dict[str, set[tuple[str, ...]]]:
    """managedFields as manager → owned paths; optionally only one operation, only the entries
    of one subresource (None: the main resource), and without one manager."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for entry in dicts(meta.get("managedFields")):
        if operation is not None and entry.get("operation") != operation:
            continue
        if subresource is not _ANY and entry.get("subresource") != subresource:
            continue
        manager = entry.get("manager", "")
        if manager == exclude:
            continue
        out.setdefault(manager, set()).update(paths_from_fields_v1(as_dict(entry.get("fieldsV1"))))
    return out


def record_manager(
    meta: dict[str, Any],
    manager: str,
    operation: str,
    api_version: str,
    paths: set[tuple[str, ...]],
    now: str,
    subresource: str | None,
    replace_paths: bool,
) -> None:
    """Update (or add) the managedFields entry of ``manager`` for ``operation``.

    Apply entries own exactly what was last applied (``replace_paths``); Update entries gather
    every field the manager has changed. The entries ``meta`` holds are never changed in place:
    they may be a stored object's.
    """
    entries = [dict(e) for e in dicts(meta.get("managedFields"))]
    mine = next(
        (
            e
            for e in entries
            if e.get("manager") == manager
            and e.get("operation") == operation
            and e.get("subresource") == subresource
        ),
        None,
    )
    if mine is None:
        mine = {"manager": manager, "operation": operation}
        entries.append(mine)
    owned = set() if replace_paths else paths_from_fields_v1(as_dict(mine.get("fieldsV1")))
    owned |= paths
    mine.update(
        {
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(owned),
        }
    )
    if subresource:
        mine["subresource"] = subresource
    meta["managedFields"] = entries
