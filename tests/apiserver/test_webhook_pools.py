"""The API server keeps one keep-alive pool per webhook address, and not for ever: webhook pods
come and go, each with an address of its own."""

from __future__ import annotations

import asyncio
import ssl

from kubetrain.local.apiserver import webhooks
from kubetrain.local.apiserver.store import Store


async def test_a_used_pool_is_reused_and_the_least_recently_used_beyond_the_limit_is_closed() -> (
    None
):
    dispatcher = webhooks.WebhookDispatcher(Store(None))
    context = ssl.create_default_context()

    def pool(n: int) -> object:
        target = webhooks._Target(f"https://10.0.0.{n}:9443", "/validate", "shown", "svc")
        return dispatcher._pool_for(target, "ca", context)

    first = pool(0)
    pools = [pool(n) for n in range(1, webhooks._POOLS_KEPT)]
    assert pool(0) is first, "a pool is kept for its address, name and CA"
    pool(webhooks._POOLS_KEPT)  # one more: the least recently used (10.0.0.1) goes
    assert len(dispatcher._pools) == webhooks._POOLS_KEPT
    assert pool(0) is first
    await asyncio.sleep(0)  # its close runs as a task of its own
    assert pools[0]._closed  # type: ignore[attr-defined]
    assert pool(1) is not pools[0], "an address used again gets a new pool"
    await dispatcher.close()
