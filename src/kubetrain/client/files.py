"""Reading ``-f`` arguments: files, folders, ``-`` for stdin; multi-document YAML and JSON.

Only shape is checked here (a mapping with apiVersion, kind and metadata.name or generateName);
the server validates the rest, so the same file gives the same answer here and under kubectl.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubetrain.api.errors import FieldError, LoadError

__all__ = ["read_objects"]

_SUFFIXES = (".yaml", ".yml", ".json")


def _expand(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for raw in paths:
        if raw == "-":
            out.append(raw)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
            if not found:
                raise LoadError(raw, [FieldError("", "folder holds no .yaml, .yml or .json file")])
            out.extend(str(p) for p in found)
        elif not path.exists():
            raise LoadError(raw, [FieldError("", "no such file or folder")])
        else:
            out.append(raw)
    return out


def _flatten(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise LoadError(where, [FieldError("", "a document must be a mapping (an object)")])
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        objs: list[dict[str, Any]] = []
        for i, item in enumerate(doc["items"]):
            objs.extend(_flatten(item, f"{where} items[{i}]"))
        return objs
    errors = [
        FieldError(key, "required", "Required")
        for key in ("apiVersion", "kind")
        if not doc.get(key)
    ]
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        errors.append(FieldError("metadata.name", "required", "Required"))
    if errors:
        raise LoadError(where, errors)
    return [doc]


def read_objects(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every object in ``paths``, in file and document order; LoadError names file and field."""
    import yaml

    objs: list[dict[str, Any]] = []
    for source in _expand(paths):
        label = "<stdin>" if source == "-" else source
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise LoadError(label, [FieldError("", exc.strerror or str(exc))]) from None
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f"line {mark.line + 1}: " if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise LoadError(label, [FieldError("", f"not valid YAML: {at}{problem}")]) from None
        count = 0
        for n, doc in enumerate(docs):
            if doc is None:  # empty documents between --- separators are allowed
                continue
            objs.extend(_flatten(doc, f"{label} (document {n + 1})" if len(docs) > 1 else label))
            count += 1
        if count == 0:
            raise LoadError(label, [FieldError("", "holds no objects")])
    return objs
