"""Schema markers carried in ``Annotated[...]`` on the wire types of :mod:`kubetrain.api.types`.

The TypedDicts are the one description of our own kinds: mypy reads them for field names and
types, and ``tools/gen_crds.py`` reads these markers to write the CRD schemas (defaults,
validations, list semantics). Markers are plain slotted classes, not dataclasses, so that
importing the types stays cheap.
"""

from __future__ import annotations

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


class _Marker:
    """A value-carrying marker; equal when of the same class with equal values."""

    __slots__ = ("value",)
    __match_args__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Marker) and type(other) is type(self) and other.value == self.value
        )

    def __hash__(self) -> int:
        return hash((type(self), repr(self.value)))


class Doc(_Marker):
    """Field description written into the CRD."""

    __slots__ = ()


class Default(_Marker):
    """Value the API server fills in when the field is absent (structural-schema default)."""

    __slots__ = ()


class Format(_Marker):
    """OpenAPI format: ``int32``, ``int64``, ``date-time``."""

    __slots__ = ()


class MinLength(_Marker):
    __slots__ = ()


class MaxLength(_Marker):
    __slots__ = ()


class Minimum(_Marker):
    __slots__ = ()


class Maximum(_Marker):
    __slots__ = ()


class MinItems(_Marker):
    __slots__ = ()


class MaxItems(_Marker):
    __slots__ = ()


class MinProperties(_Marker):
    __slots__ = ()


class Pattern(_Marker):
    __slots__ = ()


class ListType(_Marker):
    """``x-kubernetes-list-type``: ``atomic`` or ``set``."""

    __slots__ = ()


class OpenAPI(_Marker):
    """The field's schema is the Kubernetes OpenAPI definition of this name (e.g. core/v1 Pod)."""

    __slots__ = ()


class Atomic(_Marker):
    """``x-kubernetes-map-type: atomic`` on an object."""

    __slots__ = ()


class ListMap(_Marker):
    """``x-kubernetes-list-type: map`` keyed by these item fields."""

    __slots__ = ()

    def __init__(self, *keys: str) -> None:
        super().__init__(keys)


class Rule(_Marker):
    """A CEL rule (``x-kubernetes-validations``); enforced by the API server / runtime layer."""

    __slots__ = ("message",)
    __match_args__ = ("value", "message")

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(rule)
        self.message = message

    @property
    def rule(self) -> str:
        rule: str = self.value
        return rule

    def __repr__(self) -> str:
        return f"Rule({self.value!r}, {self.message!r})"
