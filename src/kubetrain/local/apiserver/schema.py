"""Schema rules for custom kinds: pruning, defaulting and validation, from ``kubetrain.api``.

``SchemaRules`` is the seam the engine writes through. ``CrdSchemas`` applies, to every custom
kind the server serves, the ``openAPIV3Schema`` of its CustomResourceDefinition as
kube-apiserver does (`kubetrain.api.schema.Structural`: one rule in one place): the CRD stored
for the kind (what ``kubectl apply`` installed) where there is one, else the CRD the server was
started with (kubetrain's own kinds, LeaderWorkerSet), else kubetrain's built-in schema of the
kind. Kinds without any (PodGroups, core kinds) are stored as sent. The engine keeps the
apiserver's order: drop nulls, prune unknown fields, apply defaults, then validate after
mutating admission; the server applies the defaults once more to what it loads from storage.
CEL rules are enforced by admission (the runtime layer's ``validate()``), not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Protocol

from kubetrain.api import codec
from kubetrain.api.access import as_dict, dicts, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.schema import Structural, schema_for
from kubetrain.kube.kinds import CUSTOM_RESOURCE_DEFINITION
from kubetrain.local.apiserver.resources import Registry, ResourceDef
from kubetrain.local.apiserver.store import Store

__all__ = ["CrdSchemas", "SchemaRules"]


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

    def read_defaults(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """``obj`` as read from storage (defaults added, as a copy), or None when unchanged."""
        ...


_CRDS_KEY = ResourceDef.of(CUSTOM_RESOURCE_DEFINITION).key


class _Kind:
    """What one custom kind's schema is now: found again only when its stored CRD changes."""

    __slots__ = ("crd", "qualified", "res", "source", "structural")

    def __init__(self, res: ResourceDef) -> None:
        self.res = res
        self.qualified = res.qualified  # the stored CRD's name
        # The stored CRD the rest was found with (stored objects are replaced, never changed
        # in place: the same object means the same schema); a fresh entry has none yet.
        self.crd: object = _UNSEEN
        self.source: tuple[str, Mapping[str, Any]] | None = None
        self.structural: Structural | None = None


_UNSEEN = object()


class CrdSchemas:
    """The schema of each custom kind of ``registry``, compiled once per CRD revision."""

    def __init__(self, registry: Registry, store: Store | None = None) -> None:
        self._registry = registry
        self._store = store
        # (apiVersion, kind) -> its entry, None for kinds that are not custom: every write
        # asks several times, so a lookup is two dict reads while the CRD stays as it is.
        self._kinds: dict[tuple[str, str], _Kind | None] = {}
        # (apiVersion, kind) -> (where the schema came from, the schema, compiled)
        self._compiled: dict[tuple[str, str], tuple[str, Mapping[str, Any], Structural]] = {}

    def _kind(self, api_version: str, kind: str) -> _Kind | None:
        key = (api_version, kind)
        try:
            entry = self._kinds[key]
        except KeyError:
            res = self._registry.by_kind(api_version, kind)
            entry = self._kinds[key] = _Kind(res) if res is not None and res.custom else None
        if entry is None:
            return None
        crd = self._store.get(_CRDS_KEY, "", entry.qualified) if self._store is not None else None
        if crd is not entry.crd:
            entry.source = _source(key, entry.res, crd)
            entry.structural = self._structural(key, entry.source)
            entry.crd = crd
        return entry

    def _structural(
        self, key: tuple[str, str], source: tuple[str, Mapping[str, Any]] | None
    ) -> Structural | None:
        if source is None:
            return None
        token, schema = source
        cached = self._compiled.get(key)
        if cached is None or cached[0] != token or cached[1] is not schema:
            cached = (token, schema, Structural(dict(schema)))
            self._compiled[key] = cached
        return cached[2]

    def _of(self, obj: Mapping[str, Any]) -> Structural | None:
        entry = self._kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        return entry.structural if entry is not None else None

    def knows(self, api_version: str, kind: str) -> bool:
        entry = self._kind(api_version, kind)
        return entry is not None and entry.structural is not None

    def prune(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[str]:
        structural = self._of(obj)
        return structural.prune(obj, settled) if structural is not None else []

    def default(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> None:
        structural = self._of(obj)
        if structural is not None:
            structural.default(obj, settled)

    def validate(self, obj: dict[str, Any], settled: Set[str] = frozenset()) -> list[FieldError]:
        structural = self._of(obj)
        return structural.errors(obj, settled=settled) if structural is not None else []

    def schema_of(self, api_version: str, kind: str) -> Mapping[str, Any] | None:
        entry = self._kind(api_version, kind)
        return entry.source[1] if entry is not None and entry.source is not None else None

    def read_defaults(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """``obj`` as read from storage: with its schema's defaults (a copy), or None where
        that changes nothing. Objects written before a default existed get it this way."""
        structural = self._of(obj)
        if structural is None:
            return None
        defaulted: dict[str, Any] = structural.default(codec.clone(dict(obj)))
        return defaulted if defaulted != obj else None


def _source(
    key: tuple[str, str], res: ResourceDef, stored: Mapping[str, Any] | None
) -> tuple[str, Mapping[str, Any]] | None:
    """(a token naming the schema's revision, the openAPIV3Schema) of a custom kind: from its
    stored CRD, else the CRD the server was started with, else the built-in one; or None."""
    if stored is not None:
        for version in dicts(obj_at(stored, "spec").get("versions")):
            schema = obj_at(version, "schema", "openAPIV3Schema")
            if version.get("name") == res.version and schema:
                rv = as_dict(stored.get("metadata")).get("resourceVersion", "")
                return f"stored:{rv}", schema
    if res.schema is not None:
        return "served", res.schema
    builtin = schema_for(*key)
    return ("builtin", builtin) if builtin is not None else None
