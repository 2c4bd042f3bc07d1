"""Values every write passes around: its options, its answer, and its pending commits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kubetrain.local.apiserver.resources import ResourceDef

__all__ = ["Op", "Result", "WriteOptions", "ns_key"]


@dataclass(slots=True)
class WriteOptions:
    """Query options every write takes."""

    field_manager: str = ""
    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore, as kube-apiserver's default
    force: bool = False
    # Who asks (a `rbac.User`), for the AdmissionReview's userInfo; None: the server itself.
    user: Any = None


@dataclass(slots=True)
class Result:
    """An answer: the object (or list/Status), the HTTP code and the ``Warning`` texts."""

    body: dict[str, Any]
    code: int = 200
    warnings: list[str] = field(default_factory=list)


class Op:
    """One request's pending commits."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[None]] = []

    async def done(self) -> None:
        if len(self.futures) == 1:
            await self.futures[0]  # most writes: no gathering future to build
        elif self.futures:
            await asyncio.gather(*self.futures)


def ns_key(res: ResourceDef, namespace: str | None) -> str:
    return (namespace or "") if res.namespaced else ""
