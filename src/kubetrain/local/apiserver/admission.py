"""Admission: the in-process stand-in for Trainer's mutating and validating webhooks.

The server calls ``mutate`` then ``validate`` for every create and update of every kind, after
schema defaulting and validation, exactly where a real apiserver calls webhooks. A denial
(``validate`` returning errors) becomes 403 Forbidden with the message a webhook denial has
upstream; warnings become ``Warning`` headers. The runtime layer's ``validate()`` is plugged in by
whoever builds the server; this module ships a permissive default and Trainer's one mutating rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from kubetrain.api import codec
from kubetrain.api.errors import FieldError

__all__ = [
    "Admission",
    "ChainAdmission",
    "ObjectReader",
    "Operation",
    "PermissiveAdmission",
    "TrainJobDefaulter",
    "webhook_name",
]

Operation = Literal["CREATE", "UPDATE", "DELETE"]


class ObjectReader(Protocol):
    """Read access to the store, for rules that look at other objects (a TrainJob's runtime)."""

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """The stored object, or None."""
        ...

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Every stored object of a kind (in one namespace when given)."""
        ...


class Admission(Protocol):
    """Admission control. Both methods see the object after schema defaulting.

    ``mutate`` returns the object to store (it may return its argument changed in place).
    ``validate`` returns (errors, warnings); any error denies the request.
    ``old`` is the stored object on UPDATE and DELETE, None on CREATE.
    A ``ChainAdmission`` hands each link's ``validate`` a copy of the object, unless the link
    says (a true ``validate_reads_only`` attribute) that it never changes what it is given.
    """

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]: ...

    def validate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> tuple[list[FieldError], list[str]]: ...


def webhook_name(api_version: str, kind: str) -> str:
    """The name upstream's validating webhook for a kind has: ``validator.trainjob.trainer.kubeflow.org``."""
    group = api_version.rpartition("/")[0]
    return f"validator.{kind.lower()}.{group}" if group else f"validator.{kind.lower()}"


class PermissiveAdmission:
    """Admits everything unchanged."""

    # Its validate reads nothing: a chain passes it the object itself, not a copy.
    validate_reads_only = True

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]:
        return obj

    def validate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> tuple[list[FieldError], list[str]]:
        return [], []


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TrainJobDefaulter(PermissiveAdmission):
    """Trainer's mutating webhook alone: stamp ``spec.runtimePatches[].time``.

    The rule is ``kubetrain.runtime``'s ``default_trainjob`` (one copy, shared with the cluster
    webhook); ``clock`` returns the RFC 3339 time to stamp. The daemon and ``kubetrain serve``
    use ``kubetrain.runtime.admission.TrainerAdmission``, which adds the validating webhooks.
    """

    def __init__(self, clock: Callable[[], str] = _now) -> None:
        self._clock = clock

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]:
        if obj.get("kind") != "TrainJob" or operation == "DELETE":
            return obj
        from kubetrain.runtime.validate import default_trainjob

        now = datetime.fromisoformat(self._clock())
        return default_trainjob(obj, old=old if operation == "UPDATE" else None, now=now)


class ChainAdmission:
    """Several admissions in order: each mutates what the previous returned; errors and warnings add up."""

    def __init__(self, links: Sequence[Admission]) -> None:
        self._links = list(links)

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]:
        for link in self._links:
            obj = link.mutate(operation, obj, old, reader=reader)
        return obj

    def validate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> tuple[list[FieldError], list[str]]:
        errors: list[FieldError] = []
        warnings: list[str] = []
        for link in self._links:
            given = obj if getattr(link, "validate_reads_only", False) else codec.clone(obj)
            e, w = link.validate(operation, given, old, reader=reader)
            errors += e
            warnings += w
        return errors, warnings
