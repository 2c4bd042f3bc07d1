"""Errors that carry field paths, shared by loading, validation, rendering and admission."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ERROR_TYPE_TEXT",
    "ErrorType",
    "FieldError",
    "LoadError",
    "aggregate_text",
    "field_error_text",
    "format_errors",
]

# The reasons Kubernetes' field.ErrorType knows; admission answers and 422 causes use them.
ErrorType = Literal[
    "Invalid",
    "Required",
    "Forbidden",
    "NotFound",
    "Duplicate",
    "NotSupported",
    "TooMany",
    "TooLong",
]


# field.ErrorType -> the words Kubernetes prints and the cause reason a 422 reports.
ERROR_TYPE_TEXT: dict[str, tuple[str, str]] = {
    "Invalid": ("Invalid value", "FieldValueInvalid"),
    "Required": ("Required value", "FieldValueRequired"),
    "Forbidden": ("Forbidden", "FieldValueForbidden"),
    "NotFound": ("Not found", "FieldValueNotFound"),
    "Duplicate": ("Duplicate value", "FieldValueDuplicate"),
    "NotSupported": ("Unsupported value", "FieldValueNotSupported"),
    "TooMany": ("Too many", "FieldValueTooMany"),
    "TooLong": ("Too long", "FieldValueTooLong"),
}


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field: ``FieldError("spec.trainer.numNodes", "must be >= 1")``."""

    path: str
    reason: str
    type: ErrorType = "Invalid"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


@dataclass
class LoadError(Exception):
    """A document that could not be read, or that breaks the schema; ``errors`` holds every problem."""

    source: str
    errors: list[FieldError] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(f"{self.source}: {e}" for e in self.errors) or self.source


def format_errors(errors: list[FieldError]) -> str:
    """One line per error, ``<field path>: <reason>``, in the order they were found."""
    return "\n".join(str(e) for e in errors)


def field_error_text(error: FieldError) -> str:
    """One error the way Kubernetes prints it: ``spec.x: Invalid value: must be >= 1``."""
    words = ERROR_TYPE_TEXT.get(error.type, (error.type, ""))[0]
    if not error.path:
        return error.reason
    if any(error.reason.startswith(w) for w, _ in ERROR_TYPE_TEXT.values()):
        return f"{error.path}: {error.reason}"  # the reason already says what kind of error
    return f"{error.path}: {words}: {error.reason}" if error.reason else f"{error.path}: {words}"


def aggregate_text(errors: Sequence[FieldError]) -> str:
    """Several errors joined like Go's ``ErrorList.ToAggregate()``: bare when one, ``[a, b]`` when many.

    This is the text of an admission denial and of a 422, on the embedded API server and in the
    cluster webhook alike.
    """
    texts = [field_error_text(e) for e in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
