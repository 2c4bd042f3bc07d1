"""Reading ``-f`` arguments: files, folders, ``-`` for stdin; multi-document YAML and JSON."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubetrain.api.errors import FieldError, LoadError

__all__ = ["read_documents", "read_objects"]

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


def _read(source: str) -> tuple[str, str]:
    """The label errors name ``source`` by, and its text (``-``: standard input)."""
    label = "<stdin>" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadError(label, [FieldError("", f"cannot read: {exc}")]) from None
    return label, text


def _flatten(doc: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        objs: list[dict[str, Any]] = []
        for i, item in enumerate(doc["items"]):
            objs.extend(_flatten(item, f"{where}items[{i}]."))
        return objs
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        raise LoadError("", [FieldError(f"{where}metadata.name", "Required value", "Required")])
    return [doc]


def read_objects(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every object in ``paths``, in file and document order; LoadError names file and field.

    Documents are checked by :func:`kubetrain.api.load.load_objects` (our kinds strictly against
    their CRD schemas) but sent as written: defaults are the server's to fill, and an applied
    default would make the CLI own fields (``spec.suspend``) it never meant to set.
    """
    from kubetrain.api.load import load_objects, parse_documents

    objs: list[dict[str, Any]] = []
    for source in _expand(paths):
        label, text = _read(source)
        load_objects(text, source=label)  # raises with every problem of this file at once
        docs = parse_documents(text, source=label)
        if not docs:
            raise LoadError(label, [FieldError("", "holds no objects")])
        for n, doc in enumerate(docs):
            try:
                objs.extend(_flatten(doc, f"[{n}]." if len(docs) > 1 else ""))
            except LoadError as exc:
                raise LoadError(label, exc.errors) from None
    return objs


def read_documents(paths: Iterable[str]) -> list[tuple[str, Any]]:
    """Every document in ``paths`` as written (no schema check), with the file it came from;
    ``v1 List`` documents are expanded. For tools that read old or foreign manifests."""
    from kubetrain.api.load import parse_documents

    out: list[tuple[str, Any]] = []
    for source in _expand(paths):
        label, text = _read(source)
        for doc in parse_documents(text, source=label):
            if (
                isinstance(doc, dict)
                and doc.get("kind") == "List"
                and isinstance(doc.get("items"), list)
            ):
                out.extend((label, item) for item in doc["items"])
            else:
                out.append((label, doc))
    return out
