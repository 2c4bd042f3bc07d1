"""What a conversion or an upgrade check tells its user: report items, findings, refusals."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from kubetrain.api.errors import FieldError

__all__ = ["Category", "Finding", "MigrateError", "ReportItem", "Severity"]


class Category(StrEnum):
    """Why a v1 field did not arrive unchanged (reference §5.8)."""

    DROPPED = "dropped"  # no v2 equivalent
    APPROXIMATED = "approximated"  # kept, but v2 behaves differently
    MANUAL = "manual"  # the user must change code, image or cluster


class Severity(StrEnum):
    """How an old v2 manifest fares on v2.3 (reference §6.3: error / warning / info)."""

    BREAKS = "breaks"
    CHANGES_BEHAVIOUR = "changes-behaviour"
    COSMETIC = "cosmetic"


@dataclass(frozen=True, slots=True)
class ReportItem:
    """One v1 field that was dropped, changed or cannot be expressed: where, why, what to do."""

    path: str
    category: Category
    why: str
    action: str

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["category"] = str(self.category)
        return out

    def __str__(self) -> str:
        return f"{self.category:<12} {self.path}: {self.why}. {self.action}"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing in a v2.0-v2.2 manifest that v2.3 treats differently, and its fix."""

    rule: str
    path: str
    severity: Severity
    message: str
    fix: str
    fixable: bool

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["severity"] = str(self.severity)
        return out

    def __str__(self) -> str:
        how = "fixed by --fix" if self.fixable else "fix by hand"
        return (
            f"{self.severity:<17} {self.path}: {self.message} [{self.rule}] Fix: {self.fix} ({how})"
        )


class MigrateError(Exception):
    """The input cannot be converted: every problem with its field path."""

    def __init__(self, what: str, errors: list[FieldError]) -> None:
        self.what = what
        self.errors = errors
        lines = "; ".join(str(e) for e in errors)
        super().__init__(f"{what}: {lines}" if what else lines)
