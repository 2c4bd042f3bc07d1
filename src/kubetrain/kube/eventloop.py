"""The event loop of a process that lives on its network traffic (the controller, the API server).

uvloop's loop and its TLS are compiled: a request sent or served costs markedly less CPU than on
asyncio's own loop, whose TLS layer is pure Python above ``ssl.MemoryBIO``. Where uvloop is
missing (it has no Windows build) asyncio's loop serves instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
