"""The streaming subresources' wire pieces: the exit Status the kubelet writes, SPDY/3.1 frames.

End to end (kubectl, the Python client) they are exercised in tests/executor/test_pod_streams.py.
"""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from kubetrain.local.apiserver import spdy
from kubetrain.local.apiserver.discovery import resource_list
from kubetrain.local.apiserver.resources import Registry
from kubetrain.local.apiserver.streaming import exit_status


@pytest.mark.parametrize(
    ("code", "command", "wire"),
    [
        pytest.param(0, ["true"], b'{"metadata":{},"status":"Success"}', id="exit 0 is Success"),
        pytest.param(
            3, ["sh", "-c", "exit 3"],
            b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit'
            b' code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExit'
            b'Code","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}',
            id="another code is NonZeroExitCode with the code as the ExitCode cause",
        ),
    ],
)  # fmt: skip
def test_exit_status_is_written_as_the_kubelet_writes_it(
    code: int, command: list[str], wire: bytes
) -> None:
    assert json.dumps(exit_status(code, command), separators=(",", ":")).encode() == wire


def _syn_stream(stream_id: int, headers: dict[str, str], deflate: zlib._Compress) -> bytes:
    """A SYN_STREAM as kubectl's SPDY library writes it (headers compressed with the
    specification's dictionary, one context for the connection)."""
    raw = struct.pack(">I", len(headers)) + b"".join(
        struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        for k, v in headers.items()
    )
    block = deflate.compress(raw) + deflate.flush(zlib.Z_SYNC_FLUSH)
    body = struct.pack(">IIBB", stream_id, 0, 0, 0) + block
    return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(body)) + body


def test_frames_are_read_whatever_the_chunking() -> None:
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    wire = (
        _syn_stream(1, {"streamType": "error", "port": "8080", "requestID": "0"}, deflate)
        + _syn_stream(3, {"streamType": "data", "port": "8080", "requestID": "0"}, deflate)
        + b"".join(spdy.FrameWriter().data(3, b"GET / HTTP/1.0\r\n\r\n", fin=True))
    )
    reader = spdy.FrameReader()
    frames = [f for i in range(0, len(wire), 7) for f in reader.feed(wire[i : i + 7])]
    assert [(f.kind, f.stream_id, f.headers, f.data, f.fin) for f in frames] == [
        (spdy.SYN_STREAM, 1, {"streamtype": "error", "port": "8080", "requestid": "0"}, b"", False),
        (spdy.SYN_STREAM, 3, {"streamtype": "data", "port": "8080", "requestid": "0"}, b"", False),
        (spdy.DATA, 3, {}, b"GET / HTTP/1.0\r\n\r\n", True),
    ]  # fmt: skip


def test_what_the_server_writes_reads_back() -> None:
    writer, reader = spdy.FrameWriter(), spdy.FrameReader()
    big = bytes(range(256)) * 300  # more than one DATA frame holds
    wire = (
        writer.syn_reply(1)
        + writer.syn_reply(3)
        + writer.ping(7)
        + b"".join(writer.data(3, big))
        + b"".join(writer.data(1, b"", fin=True))
    )
    frames = reader.feed(wire)
    assert [(f.kind, f.stream_id) for f in frames[:3]] == [
        (spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3), (spdy.PING, 0),
    ]  # fmt: skip
    assert frames[2].value == 7
    data = [f for f in frames[3:-1] if f.kind == spdy.DATA and f.stream_id == 3]
    assert len(data) > 1 and b"".join(f.data for f in data) == big
    assert (frames[-1].stream_id, frames[-1].data, frames[-1].fin) == (1, b"", True)


def test_the_header_dictionary_is_the_specifications() -> None:
    # SPDY/3 section 2.6.10.1; a zlib stream names its dictionary by this Adler-32.
    assert (len(spdy.DICTIONARY), zlib.adler32(spdy.DICTIONARY)) == (1423, 3821447106)


def test_discovery_lists_the_streaming_subresources_as_kube_apiserver_does() -> None:
    listing = resource_list(Registry.build((), ()), "", "v1")
    assert listing is not None
    entries = {e["name"]: (e["kind"], e["verbs"]) for e in listing["resources"]}
    assert {n: entries[n] for n in ("pods/attach", "pods/exec", "pods/portforward")} == {
        "pods/attach": ("PodAttachOptions", ["create", "get"]),
        "pods/exec": ("PodExecOptions", ["create", "get"]),
        "pods/portforward": ("PodPortForwardOptions", ["create", "get"]),
    }
