"""The event loop of a process that lives on its network traffic (the controller, the API server).

uvloop's loop and its TLS are compiled: a request sent or served costs markedly less CPU than on
asyncio's own loop, whose TLS layer is pure Python above ``ssl.MemoryBIO``. Where uvloop is
missing (it has no Windows build) asyncio's loop serves instead.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], *, holds_objects: bool = False) -> T:
    """``asyncio.run(main)``, on uvloop where it is installed. ``holds_objects``: the process
    keeps thousands of API objects in memory (an API server's store, a controller's caches),
    so its garbage collector is made cheap for them (`_tune_gc`)."""
    if holds_objects:
        _tune_gc()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


# Young-generation size of the cyclic garbage collector in such a process (CPython: 700).
_GC_YOUNG = 50_000


def _tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a process that keeps API objects in memory.

    Those objects are acyclic JSON trees that reference counting frees; the collector finds
    nothing in them, yet every full collection walks all of them and its default young size
    (700 allocations) runs a collection every few requests: together about a tenth of the API
    server's CPU under load. What is loaded by now (modules, schemas) is frozen out of
    collections, and the young generation is collected every 50,000 allocations instead.
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG, middle, old)
