"""Schema markers carried in ``Annotated[...]`` on the wire types of :mod:`kubetrain.api.types`.

The TypedDicts are the one description of our own kinds: mypy reads them for field names and
types, and ``tools/gen_crds.py`` reads these markers to write the CRD schemas (defaults,
validations, list semantics). Markers are tiny frozen dataclasses so that importing the types
stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Atomic",
    "Default",
    "Doc",
    "Format",
    "ListMap",
    "ListType",
    "MaxItems",
    "MaxLength",
    "Maximum",
    "MinItems",
    "MinLength",
    "MinProperties",
    "Minimum",
    "OpenAPI",
    "Pattern",
    "Rule",
]


@dataclass(frozen=True, slots=True)
class Doc:
    """Field description written into the CRD."""

    text: str


@dataclass(frozen=True, slots=True)
class Default:
    """Value the API server fills in when the field is absent (structural-schema default)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Format:
    """OpenAPI format: ``int32``, ``int64``, ``date-time``."""

    name: str


@dataclass(frozen=True, slots=True)
class MinLength:
    value: int


@dataclass(frozen=True, slots=True)
class MaxLength:
    value: int


@dataclass(frozen=True, slots=True)
class Minimum:
    value: int


@dataclass(frozen=True, slots=True)
class Maximum:
    value: int


@dataclass(frozen=True, slots=True)
class MinItems:
    value: int


@dataclass(frozen=True, slots=True)
class MaxItems:
    value: int


@dataclass(frozen=True, slots=True)
class MinProperties:
    value: int


@dataclass(frozen=True, slots=True)
class Pattern:
    regex: str


@dataclass(frozen=True, slots=True)
class Rule:
    """A CEL rule (``x-kubernetes-validations``); enforced by the API server / runtime layer."""

    rule: str
    message: str


@dataclass(frozen=True, slots=True)
class ListMap:
    """``x-kubernetes-list-type: map`` keyed by these item fields."""

    keys: tuple[str, ...]

    def __init__(self, *keys: str) -> None:
        object.__setattr__(self, "keys", keys)


@dataclass(frozen=True, slots=True)
class ListType:
    """``x-kubernetes-list-type``: ``atomic`` or ``set``."""

    kind: str


@dataclass(frozen=True, slots=True)
class Atomic:
    """``x-kubernetes-map-type: atomic`` on an object."""


@dataclass(frozen=True, slots=True)
class OpenAPI:
    """The field's schema is the Kubernetes OpenAPI definition of this name (e.g. core/v1 Pod)."""

    definition: str
