"""Write Kubernetes objects as YAML or JSON, the way kubectl shows them, and tidy them first.

``clean()`` decides what "empty" means from the CRD schema, so that it never changes what an
object says:

- ``None`` is always dropped (the API server prunes nulls too);
- an empty list, an empty string and an empty *map* (``labels: {}``, ``nodeSelector: {}``) are
  dropped, unless the field has a schema default (dropping it would let the default in, e.g.
  ``mpiImplementation: ""``);
- an empty *struct* (an object schema that is not a map) is kept: its presence may be the value,
  as in ``mlPolicy.torch: {}``, ``jax: {}``, ``xgboost: {}``, ``emptyDir: {}``, and a schema cannot
  tell those from structs whose emptiness means nothing. The exceptions: structs that must have
  at least one property (``status: {}``, ``template: {}``), and a short list of fields known to
  mean nothing when empty (``metadata``, ``status``, ``resources``, ``securityContext``).
  Keeping a meaningless ``{}`` is noise; dropping a meaningful one would change the object.

Objects without a schema here (ConfigMap, Pod, ...) keep their empty maps, except the well-known
label/annotation/selector maps, since without a schema a map cannot be told from a struct.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from kubetrain.api.schema import _key, _Node, _root

if TYPE_CHECKING:
    from kubetrain.api.types import Obj

__all__ = ["clean", "dump_json", "dump_yaml"]

# Maps (not structs) in core objects that clean() may drop when empty even without a schema.
_KNOWN_MAPS = frozenset(
    {
        "labels",
        "annotations",
        "nodeSelector",
        "data",
        "stringData",
        "binaryData",
        "limits",
        "requests",
    }
)
# Structs whose emptiness means the same as their absence.
_NOISE_STRUCTS = frozenset({"metadata", "status", "resources", "securityContext"})


def clean(obj: Any) -> Any:
    """A copy of ``obj`` without ``None`` and empty values (rules in the module docstring)."""
    if isinstance(obj, dict):
        root = _root(_key(obj)) if "kind" in obj else None
        return _clean(obj, root, "")
    return _clean(obj, None, "")


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, (list, dict, str)) and len(v) == 0)


def _keep_empty(node: _Node | None, name: str, value: Any, default: Any) -> bool:
    if value is None:
        return False
    if default is not _NONE and default != value:
        return True
    if isinstance(value, dict):
        if name in _NOISE_STRUCTS:
            return False
        if node is None:
            return name not in _KNOWN_MAPS
        is_struct = node.values is None and not (node.preserve and node.props is None)
        return is_struct and not node.min_props
    return False


_NONE: Any = object()


def _clean(value: Any, node: _Node | None, name: str) -> Any:
    if isinstance(value, dict):
        props = node.props if node is not None else None
        defaults = dict(node.defaults) if node is not None and node.defaults else {}
        out: dict[Any, Any] = {}
        for k, v in value.items():
            child: _Node | None
            if props is not None:
                child = props.get(k)
            elif node is not None:
                child = node.values
            else:
                child = None
            cv = _clean(v, child, k)
            if _is_empty(cv) and not _keep_empty(child, k, cv, defaults.get(k, _NONE)):
                continue
            out[k] = cv
        return out
    if isinstance(value, list):
        item = node.items if node is not None else None
        return [_clean(v, item, name) for v in value if v is not None]
    return value


@cache
def _dumper() -> type:
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Dumper(base):  # type: ignore[misc, valid-type]  # base is chosen at run time
        pass

    def str_presenter(dumper: Any, data: str) -> Any:
        # Multi-line strings (scripts in command/args) as literal blocks, like kubectl.
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, str_presenter)
    return Dumper


def dump_yaml(objs: Obj | Sequence[Obj]) -> str:
    """Block-style YAML, keys in their given order; several objects become ``---``-separated
    documents."""
    import yaml

    docs = [objs] if isinstance(objs, dict) else list(objs)
    return yaml.dump_all(
        docs,
        Dumper=_dumper(),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        explicit_start=len(docs) > 1,
        width=1 << 30,
    )


def dump_json(objs: Obj | Sequence[Obj], *, indent: int | None = 4) -> str:
    """JSON as ``kubectl -o json`` writes it; several objects become one ``v1 List``."""
    doc: Any = (
        objs
        if isinstance(objs, dict)
        else {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    )
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"
