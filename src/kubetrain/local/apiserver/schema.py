"""Schema rules for custom kinds: pruning, defaulting and validation, from ``kubetrain.api``.

``SchemaRules`` is the seam the engine writes through; ``ProjectSchemas`` delegates to
``kubetrain.api`` (the project's CRD schemas, one rule in one place). Kinds it has no schema for
(PodGroups, core kinds) are stored as sent. The engine keeps the apiserver's order: drop nulls,
prune unknown fields, apply defaults, then validate after mutating admission. CEL rules are
enforced by admission (the runtime layer's ``validate()``), not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Protocol

from kubetrain.api.errors import FieldError

__all__ = ["ProjectSchemas", "SchemaRules"]


class SchemaRules(Protocol):
    """What the engine needs from a schema implementation (all in place, on whole objects)."""

    def knows(self, api_version: str, kind: str) -> bool:
        """Whether this kind has a structural schema."""
        ...

    def prune(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[str]:
        """Drop nulls and fields the schema does not declare; return the unknown fields' paths.
        ``settled``: top-level fields an update leaves as stored (already pruned)."""
        ...

    def default(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> None:
        """Fill in ``default`` values (``settled`` fields are already defaulted)."""
        ...

    def validate(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[FieldError]:
        """Every schema violation, each naming its field; ``settled`` fields are not checked
        again (validation ratcheting: an update may leave a stored value as it is)."""
        ...

    def schema_of(self, api_version: str, kind: str) -> Mapping[str, Any] | None:
        """The openAPIV3Schema (server-side apply reads its list types), or None."""
        ...


class ProjectSchemas:
    """``kubetrain.api``'s schemas (imported on first use: they are large)."""

    def __init__(self) -> None:
        from kubetrain.api import schema

        self._api = schema
        self._known = {tuple(k) for k in schema.served_kinds()}

    def knows(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self._known

    def prune(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[str]:
        for key in [k for k, v in obj.items() if v is None]:
            del obj[key]
        for key, value in obj.items():
            if key not in settled:
                self._api.drop_nulls(value)
        return self._api.prune_unknown(obj, settled)

    def default(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> None:
        self._api.apply_defaults(obj, settled)

    def validate(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[FieldError]:
        return self._api.schema_errors(obj, settled)

    def schema_of(self, api_version: str, kind: str) -> Mapping[str, Any] | None:
        return self._api.schema_for(api_version, kind)
