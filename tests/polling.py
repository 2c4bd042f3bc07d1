"""Waiting in async tests for something to become true, bounded in time.

Imported by name: ``tests/`` is on ``sys.path`` under pytest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["until"]

T = TypeVar("T")


async def until(
    probe: Callable[[], Awaitable[T]],
    timeout: float,
    what: str = "the condition",
    every: float = 0.1,
) -> T:
    """``probe()``'s first truthy answer, asked every ``every`` seconds; TimeoutError naming
    ``what`` once ``timeout`` seconds have passed without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(every)
