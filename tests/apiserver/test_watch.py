"""Watch semantics, over raw HTTP against an in-process server (port 0, plain http, no auth)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubetrain.local.apiserver import ApiServer

CM = "/api/v1/namespaces/default/configmaps"


# These tests describe the embedded server itself: watch history size and bookmark timing are set on an in-process server.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="embedded server only"
)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    srv = ApiServer(
        tmp_path, in_memory=True, tls=False, auth=False, bookmark_interval=0.2, history=20
    )
    await srv.start()
    yield srv
    await srv.close()


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(server.url) as session:
        yield session


async def _cm(
    http: aiohttp.ClientSession, name: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    async with http.post(CM, json={"metadata": {"name": name, "labels": labels or {}}}) as r:
        assert r.status == 201
        body: dict[str, Any] = await r.json()
        return body


async def _events(
    http: aiohttp.ClientSession, query: str, count: int, timeout: float = 5
) -> list[dict[str, Any]]:
    """The first ``count`` events (or all until the server ends the stream)."""
    out: list[dict[str, Any]] = []
    async with http.get(f"{CM}?{query}") as r:
        assert r.status == 200 and r.headers["Content-Type"] == "application/json"

        async def read() -> None:
            async for line in r.content:
                out.append(json.loads(line))
                if len(out) >= count:
                    return

        await asyncio.wait_for(read(), timeout)
    return out


@pytest.mark.parametrize(
    "flag", ["true", "True", "1"], ids=["lower case", "capitalised (Python clients)", "one"]
)
async def test_watch_flag_spellings_all_start_a_watch(
    http: aiohttp.ClientSession, flag: str
) -> None:
    await _cm(http, "a")
    events = await _events(http, f"watch={flag}", 1)
    assert (events[0]["type"], events[0]["object"]["metadata"]["name"]) == ("ADDED", "a")


async def test_without_a_resource_version_the_current_state_comes_first(
    http: aiohttp.ClientSession,
) -> None:
    await _cm(http, "a")
    await _cm(http, "b")
    events = await _events(http, "watch=1", 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


async def test_from_a_resource_version_only_later_changes_come(http: aiohttp.ClientSession) -> None:
    first = await _cm(http, "a")
    await _cm(http, "b")
    events = await _events(
        http, f"watch=1&resourceVersion={first['metadata']['resourceVersion']}", 1
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]


async def test_a_resource_version_older_than_the_history_is_410_expired(
    http: aiohttp.ClientSession,
) -> None:
    first = await _cm(http, "first")
    for i in range(30):  # history keeps 20 changes
        await _cm(http, f"cm-{i}")
    events = await _events(
        http, f"watch=1&resourceVersion={first['metadata']['resourceVersion']}", 1
    )
    assert events[0]["type"] == "ERROR"
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")


async def test_bookmarks_carry_the_latest_resource_version(http: aiohttp.ClientSession) -> None:
    created = await _cm(http, "a")
    events = await _events(
        http,
        f"watch=1&allowWatchBookmarks=true&resourceVersion={created['metadata']['resourceVersion']}",
        1,
    )
    assert events[0]["type"] == "BOOKMARK"
    assert (
        events[0]["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    )


async def test_timeout_seconds_ends_the_stream(http: aiohttp.ClientSession) -> None:
    started = time.monotonic()
    events = await _events(http, "watch=1&timeoutSeconds=1", 100)
    assert events == [] and 0.9 < time.monotonic() - started < 3


async def test_an_object_leaving_the_selector_arrives_as_deleted(
    http: aiohttp.ClientSession,
) -> None:
    created = await _cm(http, "a", {"team": "x"})
    rv = created["metadata"]["resourceVersion"]
    async with http.patch(
        f"{CM}/a",
        json={"metadata": {"labels": {"team": "y"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ) as r:
        assert r.status == 200
    events = await _events(http, f"watch=1&labelSelector=team%3Dx&resourceVersion={rv}", 1)
    assert events[0]["type"] == "DELETED"


async def test_watch_list_ends_its_initial_events_with_a_bookmark(
    http: aiohttp.ClientSession,
) -> None:
    await _cm(http, "a")
    events = await _events(
        http,
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        2,
    )
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_a_table_watch_sends_rows(http: aiohttp.ClientSession) -> None:
    await _cm(http, "a")
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    async with http.get(f"{CM}?watch=1", headers=headers) as r:
        line = await asyncio.wait_for(r.content.readline(), 5)
    event = json.loads(line)
    assert event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["cells"][0] == "a"


async def test_close_ends_open_watches_at_once(tmp_path: Path) -> None:
    srv = ApiServer(tmp_path, in_memory=True, tls=False, auth=False)
    await srv.start()
    async with aiohttp.ClientSession(srv.url) as session, session.get(f"{CM}?watch=1") as r:
        started = time.monotonic()
        await srv.close()
        assert await r.content.read() == b""
    assert time.monotonic() - started < 2, "close() must not wait for watch clients"


async def test_a_view_watch_sends_the_served_shape(http: aiohttp.ClientSession) -> None:
    core_event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "message": "hello",
    }
    async with http.post("/api/v1/namespaces/default/events", json=core_event) as r:
        assert r.status == 201
    async with http.get("/apis/events.k8s.io/v1/namespaces/default/events?watch=1") as r:
        event = json.loads(await asyncio.wait_for(r.content.readline(), 5))
    assert event["object"]["apiVersion"] == "events.k8s.io/v1"
    assert (event["object"]["note"], event["object"]["regarding"]["name"]) == ("hello", "p")


async def _events_per_write(
    response: aiohttp.ClientResponse, events: int, timeout: float = 30
) -> list[int]:
    """How many events each write of the server carried (one write is one HTTP chunk), until
    ``events`` events have come."""
    counts: list[int] = []
    pending = b""
    async with asyncio.timeout(timeout):
        async for data, end_of_chunk in response.content.iter_chunks():
            pending += data
            if end_of_chunk:
                counts.append(pending.count(b"\n"))
                pending = b""
                if sum(counts) >= events:
                    break
    return counts


async def test_a_lone_event_goes_out_at_once_and_a_stream_of_them_in_a_few_writes(
    http: aiohttp.ClientSession,
) -> None:
    start = await _cm(http, "start")
    rv = start["metadata"]["resourceVersion"]
    async with http.get(f"{CM}?watch=1&resourceVersion={rv}") as watch:
        began = time.monotonic()
        await _cm(http, "lone")
        assert await _events_per_write(watch, 1) == [1]
        # Measured from before the create: an idle watch does not hold its first event back.
        assert time.monotonic() - began < 2
        await asyncio.sleep(0.2)  # idle again
        # One create after another (about a millisecond each): without a pause after each
        # write, every event would go out alone, as it comes.
        for i in range(100):
            await _cm(http, f"stream-{i}")
        counts = await _events_per_write(watch, 100)
    assert sum(counts) == 100
    # The watch gathers what comes while it pauses after a write, the longer the more that
    # write carried: a stream of events takes a fraction of a write each.
    assert len(counts) <= 40, counts
