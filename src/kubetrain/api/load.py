"""Read Kubernetes documents (YAML or JSON) and check our kinds against their CRD schemas.

For TrainJob, TrainingRuntime, ClusterTrainingRuntime and JobSet a document is treated as the API
server would with ``kubectl apply --validate=strict``: nulls dropped, CRD defaults applied,
unknown fields, wrong types, enum and bound violations reported, every problem at once, in one
:class:`LoadError`. Documents of other kinds pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api.errors import ErrorType, FieldError, LoadError
from kubetrain.api.schema import apply_defaults, drop_nulls, served_kinds, validate_object

if TYPE_CHECKING:
    from kubetrain.api.types import Obj

__all__ = ["load_files", "load_objects", "parse_documents"]

_EXTENSIONS = (".yaml", ".yml", ".json")


@cache
def _loader() -> type:
    """CSafeLoader without the YAML 1.1 timestamp resolver.

    Kubernetes keeps ``creationTimestamp: 2025-01-01T00:00:00Z`` a string; PyYAML would turn it
    into a datetime, which neither JSON nor our schemas accept.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]  # base is chosen at run time
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            # kubectl and the API server reject a key given twice; PyYAML keeps the last one.
            seen: set[str] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not hasattr(key_node, "style"):
                    continue
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

    # An explicit ``!!timestamp`` stays the text it is too (PyYAML crashes on a malformed one).
    Loader.add_constructor(
        "tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node)
    )
    Loader.yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for ch, resolvers in base.yaml_implicit_resolvers.items()
    }
    return Loader


def parse_documents(text: str, *, source: str) -> list[Any]:
    """Every non-empty document of ``text`` (YAML, multi-document YAML, or JSON), unchecked.

    Raises :class:`LoadError` with line and column for malformed input.
    """
    stripped = text.lstrip()
    json_error: json.JSONDecodeError | None = None
    if stripped[:1] in ("{", "["):
        # JSON is valid YAML too, but json is ~20x faster and exact about numbers.
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            json_error = e  # maybe YAML flow style after all; report this if YAML fails too
        except RecursionError:
            raise LoadError(source, [FieldError("", "invalid JSON: nested too deeply")]) from None
        else:
            return [d for d in (data if isinstance(data, list) else [data]) if d is not None]
    import yaml

    try:
        docs = [d for d in yaml.load_all(text, Loader=_loader()) if d is not None]
    except yaml.YAMLError as e:
        if json_error is not None:
            reason = f"line {json_error.lineno}, column {json_error.colno}: {json_error.msg}"
            raise LoadError(source, [FieldError("", reason)]) from None
        if not isinstance(e, yaml.MarkedYAMLError):
            raise LoadError(source, [FieldError("", f"invalid YAML: {e}")]) from None
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = " ".join(x for x in (e.context, e.problem) if x)
        raise LoadError(source, [FieldError("", f"{where}{problem or 'invalid YAML'}")]) from None
    except (ValueError, TypeError, RecursionError) as e:
        # ValueError/TypeError: constructors fed odd values (e.g. unhashable merge keys).
        raise LoadError(source, [FieldError("", f"invalid YAML: {e}")]) from None
    if "&" in text and "*" in text:
        # Anchors and aliases: refuse self-referential documents and alias bombs, which no
        # Kubernetes object can be and which would make every later walk endless.
        problem = _alias_problem(docs)
        if problem:
            raise LoadError(source, [FieldError("", problem)])
        # An alias is a copy in Kubernetes, not a second name for one dict: unshare them so
        # that defaulting or editing one place never changes another.
        docs = [_unshare(d) for d in docs]
    return docs


def _unshare(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unshare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshare(v) for v in value]
    return value


# More nodes than any real object has once YAML aliases are expanded (kubectl's limit is similar).
_MAX_EXPANDED_NODES = 1_000_000


def _alias_problem(docs: list[Any]) -> str:
    """Why ``docs`` cannot be Kubernetes objects, or "" when they can."""
    count = 0
    # Depth-first, with the containers on the current path: meeting one again is a cycle.
    stack: list[tuple[Any, bool]] = [(d, False) for d in docs]
    on_path: set[int] = set()
    while stack:
        value, leaving = stack.pop()
        if leaving:
            on_path.discard(id(value))
            continue
        count += 1
        if count > _MAX_EXPANDED_NODES:
            return f"too many values once aliases are expanded (more than {_MAX_EXPANDED_NODES})"
        if isinstance(value, (dict, list)):
            if id(value) in on_path:
                return "a YAML alias refers to a value that contains it"
            on_path.add(id(value))
            stack.append((value, True))
            children = value.values() if isinstance(value, dict) else value
            stack.extend((c, False) for c in children)
    return ""


def _expand(docs: list[Any]) -> Iterator[tuple[Any, str]]:
    """Documents with their locator; a ``v1 List`` (kubectl's output) is expanded into items."""
    many = len(docs) > 1
    for i, doc in enumerate(docs):
        prefix = f"[{i}]" if many else ""
        if (
            isinstance(doc, dict)
            and doc.get("kind") == "List"
            and doc.get("apiVersion") == "v1"
            and isinstance(doc.get("items"), list)
        ):
            for j, item in enumerate(doc["items"]):
                yield item, f"{prefix}items[{j}]"
        else:
            yield doc, prefix


@cache
def _our_groups() -> dict[str, dict[str, list[str]]]:
    """group -> kind -> served versions."""
    out: dict[str, dict[str, list[str]]] = {}
    for api_version, kind in served_kinds():
        group, _, version = api_version.rpartition("/")
        out.setdefault(group, {}).setdefault(kind, []).append(version)
    return out


def _check_document(doc: Any, errors: list[FieldError], where: str) -> None:
    def err(path: str, reason: str, kind: ErrorType = "Invalid") -> None:
        full = f"{where}.{path}" if where and path else (where or path)
        errors.append(FieldError(full, reason, kind))

    if not isinstance(doc, dict):
        err("", f"a document must be a mapping (a Kubernetes object), not {type(doc).__name__}")
        return
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    for name, value in (("apiVersion", api_version), ("kind", kind)):
        if value is None:
            err(name, "Required value", "Required")
        elif not isinstance(value, str) or not value:
            err(
                name, f"Invalid value: {json.dumps(value, default=str)}: must be a non-empty string"
            )
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return
    group, _, version = api_version.rpartition("/")
    kinds = _our_groups().get(group)
    if kinds is None:
        return  # not ours: passes through untouched
    if kind not in kinds:
        import difflib

        near = difflib.get_close_matches(kind, list(kinds), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        err(
            "kind",
            f"Unsupported value: {json.dumps(kind)}: no such kind in {group}{hint}",
            "NotSupported",
        )
        return
    if version not in kinds[kind]:
        supported = ", ".join(json.dumps(f"{group}/{v}") for v in kinds[kind])
        err(
            "apiVersion",
            f"Unsupported value: {json.dumps(api_version)}: supported values: {supported}",
            "NotSupported",
        )
        return
    drop_nulls(doc)
    apply_defaults(doc)
    for e in validate_object(doc, strict=True):
        err(e.path, e.reason, e.type)


def load_objects(text: str, *, source: str) -> list[Obj]:
    """Parse ``text`` (YAML, multi-document YAML or JSON) into Kubernetes objects.

    Empty documents are skipped and ``v1 List`` documents expanded. Our kinds get their CRD
    defaults and are checked strictly; any problem anywhere raises one :class:`LoadError` that
    lists them all (paths of multi-document input start with the document index, ``[1].spec...``).
    """
    docs = parse_documents(text, source=source)
    errors: list[FieldError] = []
    out: list[Obj] = []
    for doc, where in _expand(docs):
        try:
            _check_document(doc, errors, where)
        except RecursionError:
            errors.append(FieldError(where, "Invalid value: the document nests too deeply"))
        out.append(doc)
    if errors:
        raise LoadError(source, errors)
    return out


def _files(paths: Sequence[str | Path]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(f for f in p.iterdir() if f.suffix in _EXTENSIONS and f.is_file())
        else:
            yield p


def load_files(paths: Sequence[str | Path]) -> list[Obj]:
    """:func:`load_objects` over files and folders (a folder's ``*.yaml``, ``*.yml``, ``*.json``,
    sorted by name, not recursive). All files are read; if any has problems, one
    :class:`LoadError` names them all (its source is the file, or the files, concerned)."""
    out: list[Obj] = []
    failed: list[LoadError] = []
    for f in _files(paths):
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            failed.append(LoadError(str(f), [FieldError("", f"cannot read: {e}")]))
            continue
        try:
            out.extend(load_objects(text, source=str(f)))
        except LoadError as e:
            failed.append(e)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise LoadError(
            ", ".join(e.source for e in failed),
            [
                FieldError(f"{e.source}: {x.path}" if x.path else e.source, x.reason, x.type)
                for e in failed
                for x in e.errors
            ],
        )
    return out
