"""``pods/log`` served from the executor's files: container choice, tail, previous, follow."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kubetrain.local.apiserver import ApiServer

PODS = "/api/v1/namespaces/default/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}


# These tests describe the embedded server itself: log files are the embedded server's.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="embedded server only"
)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, Path]]:
    srv = ApiServer(tmp_path, in_memory=True, tls=False, auth=False)
    await srv.start()
    async with aiohttp.ClientSession(srv.url) as session:
        for name, containers in [("one", ["node"]), ("two", ["node", "sidecar"])]:
            body = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": c, "image": "x"} for c in containers]},
            }
            async with session.post(PODS, json=body) as r:
                assert r.status == 201
            await _phase(session, name, "Running")
        folder = tmp_path / "logs" / "default"
        (folder / "one").mkdir(parents=True)
        (folder / "two").mkdir(parents=True)
        (folder / "one" / "node.log").write_text("a\nb\nc\n")
        (folder / "one" / "node.0.log").write_text("old 0\n")
        (folder / "one" / "node.1.log").write_text("old 1\n")
        (folder / "two" / "sidecar.log").write_text("side\n")
        yield session, folder
    await srv.close()


async def _phase(session: aiohttp.ClientSession, name: str, phase: str) -> None:
    async with session.patch(
        f"{PODS}/{name}/status", json={"status": {"phase": phase}}, headers=MERGE
    ) as r:
        assert r.status == 200


async def _log(session: aiohttp.ClientSession, pod: str, query: str = "") -> tuple[int, str]:
    async with session.get(f"{PODS}/{pod}/log?{query}") as r:
        return r.status, await r.text()


@pytest.mark.parametrize(
    ("pod", "query", "expected"),
    [
        ("one", "", "a\nb\nc\n"),
        ("one", "container=node", "a\nb\nc\n"),
        ("one", "tailLines=2", "b\nc\n"),
        ("one", "tailLines=0", ""),
        ("one", "previous=true", "old 1\n"),
        ("one", "limitBytes=3", "a\nb"),
        ("two", "container=sidecar", "side\n"),
    ],
    ids=[
        "the only container by default",
        "a named container",
        "the last lines",
        "no lines",
        "the previous instance is the highest restart",
        "a byte limit",
        "one of several containers",
    ],
)
async def test_log_reads(
    env: tuple[aiohttp.ClientSession, Path], pod: str, query: str, expected: str
) -> None:
    assert await _log(env[0], pod, query) == (200, expected)


@pytest.mark.parametrize(
    ("pod", "query", "code"),
    [("two", "", 400), ("one", "container=nope", 400), ("absent", "", 404)],
    ids=["several containers need a name", "an unknown container", "a missing pod"],
)
async def test_log_errors(
    env: tuple[aiohttp.ClientSession, Path], pod: str, query: str, code: int
) -> None:
    assert (await _log(env[0], pod, query))[0] == code


async def test_timestamps_prefix_each_line(env: tuple[aiohttp.ClientSession, Path]) -> None:
    _, text = await _log(env[0], "one", "timestamps=true")
    lines = text.splitlines()
    assert len(lines) == 3 and all(line.split(" ", 1)[0].endswith("Z") for line in lines)
    assert [line.split(" ", 1)[1] for line in lines] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "ending", ["Succeeded", "Failed", "deleted"], ids=["pod succeeded", "pod failed", "pod deleted"]
)
async def test_follow_streams_appends_until_the_pod_ends(
    env: tuple[aiohttp.ClientSession, Path], ending: str
) -> None:
    session, folder = env
    path = folder / "one" / "node.log"
    async with session.get(f"{PODS}/one/log?follow=True") as r:
        assert await r.content.readexactly(6) == b"a\nb\nc\n"
        with path.open("a") as fh:
            fh.write("d\n")
        assert await asyncio.wait_for(r.content.readexactly(2), 5) == b"d\n"
        if ending == "deleted":
            async with session.delete(f"{PODS}/one") as d:
                assert d.status == 200
        else:
            await _phase(session, "one", ending)
        assert await asyncio.wait_for(r.content.read(), 5) == b""
