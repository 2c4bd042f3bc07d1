"""Errors that carry field paths, shared by loading, validation, rendering and admission."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ErrorType", "FieldError", "LoadError", "format_errors"]

# The reasons Kubernetes' field.ErrorType knows; admission answers and 422 causes use them.
ErrorType = Literal[
    "Invalid", "Required", "Forbidden", "NotFound", "Duplicate", "NotSupported", "TooMany", "TooLong"
]


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
