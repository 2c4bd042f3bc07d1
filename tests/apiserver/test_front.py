"""The API server's front answers plain requests itself and hands streams to aiohttp on the same
connection: what a client sees is the same either way. These tests speak raw HTTP/1.1 to show
the connection-level behaviour kubectl and the SDKs rely on without noticing."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubetrain.local.apiserver import ApiServer

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")), reason="starts its own server"
)

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[int]:
    server = ApiServer(tmp_path, in_memory=True, tls=False, auth=False)
    await server.start()
    try:
        yield server.port
    finally:
        await server.close()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One whole answer with a Content-Length body: status, headers (lower-case), body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(
        (k.strip().lower(), v.strip())
        for k, v in (line.split(":", 1) for line in lines[1:] if line)
    )
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


def _get(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()


def _post(path: str, body: dict[str, object], extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n{extra}\r\n"
    )
    return head.encode() + data


def _configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


async def test_a_kept_alive_connection_serves_requests_then_a_watch_on_it_streams(
    port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get("/version"))
    assert (await _answer(reader))[0] == 200
    writer.write(_post(CONFIGMAPS, _configmap("before")))
    status, headers, body = await _answer(reader)
    assert (status, headers["content-type"]) == (201, "application/json")
    assert body.endswith(b"\n") and json.loads(body)["metadata"]["name"] == "before"
    listed = json.loads((await _answer_to(writer, reader, _get(CONFIGMAPS)))[2])
    version = listed["metadata"]["resourceVersion"]
    # The same connection now carries a watch: aiohttp streams it from here on.
    writer.write(_get(f"{CONFIGMAPS}?watch=true&resourceVersion={version}"))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 ") and b"chunked" in head.lower()
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
    assert (await _answer_to(other_writer, other_reader, _post(CONFIGMAPS, _configmap("after"))))[
        0
    ] == 201
    line = b""
    while b"\n" not in line.split(b"\r\n", 1)[-1]:
        line += await asyncio.wait_for(reader.read(65536), 10)
    event = json.loads(line.split(b"\r\n", 1)[1].split(b"\n", 1)[0])
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after")
    for w in (writer, other_writer):
        w.close()


async def _answer_to(
    writer: asyncio.StreamWriter, reader: asyncio.StreamReader, request: bytes
) -> tuple[int, dict[str, str], bytes]:
    writer.write(request)
    return await _answer(reader)


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("watch=true", id="watch=true streams"),
        pytest.param("limit=5&watch=1", id="watch among other parameters streams"),
        pytest.param("wat%63h=true", id="a percent-encoded watch parameter streams"),
    ],
)
async def test_a_watch_however_its_query_spells_it_streams(port: int, query: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get(f"{CONFIGMAPS}?{query}"))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 ") and b"chunked" in head.lower()
    writer.close()


async def test_pipelined_requests_are_answered_in_order(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post(CONFIGMAPS, _configmap("one")) + _get(f"{CONFIGMAPS}/one") + _get("/nope"))
    answers = [await _answer(reader) for _ in range(3)]
    assert [a[0] for a in answers] == [201, 200, 404]
    assert json.loads(answers[1][2])["metadata"]["name"] == "one"
    assert json.loads(answers[2][2])["kind"] == "Status"
    writer.close()


async def test_connection_close_expect_continue_and_a_malformed_request(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_post(CONFIGMAPS, _configmap("continued"), "Expect: 100-continue\r\n"))
    assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert (await _answer(reader))[0] == 201
    writer.write(_get("/version", "Connection: close\r\n"))
    status, headers, _ = await _answer(reader)
    assert (status, headers["connection"]) == (200, "close")
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    status, headers, _ = await _answer(reader)
    assert (status, headers["connection"]) == (400, "close")
    writer.close()


async def test_a_body_past_the_limit_is_refused_as_before(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    size = 3 * 1024 * 1024 + 1
    head = (
        f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    writer.write(head.encode() + b" " * size)
    status, _, body = await _answer(reader)
    assert status == 413
    assert json.loads(body)["reason"] == "RequestEntityTooLarge"
    writer.close()
