"""SPDY/3.1 framing, the server half, as much as ``kubectl port-forward`` speaks.

kubectl 1.32 forwards ports over SPDY tunnelled in a WebSocket (subprotocol
``SPDY/3.1+portforward.k8s.io``): each local connection opens two SPDY streams, an error
stream and a data stream, both carrying ``port`` and ``requestID`` headers. The server
answers each with SYN_REPLY, copies bytes between the data stream and the pod, and writes
a failure as text on the error stream.

Header blocks are zlib-compressed with the dictionary of the SPDY/3 specification (section
2.6.10.1), one compression context per direction for the whole connection. Flow control
(WINDOW_UPDATE) is accepted and ignored: Kubernetes' SPDY library does not enforce it.
No PyPI package does SPDY/3.1 framing in both directions (``spdy-py`` only decodes), hence
this module.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = [
    "DATA",
    "FLAG_FIN",
    "GOAWAY",
    "PING",
    "RST_STREAM",
    "SETTINGS",
    "SYN_REPLY",
    "SYN_STREAM",
    "WINDOW_UPDATE",
    "Frame",
    "FrameReader",
    "FrameWriter",
    "SpdyError",
]

VERSION = 3
DATA = 0
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS = 1, 2, 3, 4
PING, GOAWAY, HEADERS, WINDOW_UPDATE = 6, 7, 8, 9
FLAG_FIN = 0x01
# RST_STREAM status codes.
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5
# A frame's length is 24 bits; data is sent in pieces well below that.
MAX_DATA = 32 * 1024

_NAMES = (
    (
        "options head post put delete trace accept accept-charset accept-encoding "
        "accept-language accept-ranges age allow authorization cache-control connection "
        "content-base content-encoding content-language content-length content-location "
        "content-md5 content-range content-type date etag expect expires from host if-match "
        "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
        "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
        "server te trailer transfer-encoding upgrade user-agent vary via warning "
        "www-authenticate method get status|200 OK|version|HTTP/1.1|url|public|set-cookie|"
        "keep-alive|origin"
    )
    .replace(" ", "|")
    .replace("200|OK", "200 OK")
    .split("|")
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417"
    "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
    "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
    "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec"
    " 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,"
    "image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,public"
    "privatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# The specification's header dictionary: length-prefixed names, then common values.
DICTIONARY = b"".join(struct.pack(">I", len(n)) + n.encode() for n in _NAMES) + _TAIL.encode()


class SpdyError(Exception):
    """The peer sent something that is not SPDY/3.1."""


@dataclass
class Frame:
    """One frame: ``kind`` is DATA or a control frame type."""

    kind: int
    stream_id: int = 0
    flags: int = 0
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    value: int = 0  # RST_STREAM/GOAWAY status, PING id, WINDOW_UPDATE delta

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class FrameReader:
    """Bytes in (any chunking), frames out."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            body = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, body))
        return frames

    def _frame(self, head: bytes, body: bytes) -> Frame:
        flags = head[4]
        if not head[0] & 0x80:
            stream = int.from_bytes(head[:4], "big") & 0x7FFFFFFF
            return Frame(DATA, stream, flags, body)
        version = int.from_bytes(head[:2], "big") & 0x7FFF
        kind = int.from_bytes(head[2:4], "big")
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        frame = Frame(kind, flags=flags)
        if kind in (SYN_STREAM, SYN_REPLY, HEADERS, RST_STREAM, WINDOW_UPDATE):
            frame.stream_id = _id(body[:4])
        if kind == SYN_STREAM:
            frame.headers = self._headers(body[10:])
        elif kind in (SYN_REPLY, HEADERS):
            frame.headers = self._headers(body[4:])
        elif kind in (RST_STREAM, WINDOW_UPDATE):
            frame.value = _id(body[4:8])
        elif kind == PING:
            frame.value = int.from_bytes(body[:4], "big")
        elif kind == GOAWAY:
            frame.stream_id, frame.value = _id(body[:4]), int.from_bytes(body[4:8], "big")
        return frame

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as err:
            raise SpdyError(f"bad header block: {err}") from err
        headers: dict[str, str] = {}
        count, at = int.from_bytes(raw[:4], "big"), 4
        for _ in range(count):
            size = int.from_bytes(raw[at : at + 4], "big")
            name = raw[at + 4 : at + 4 + size].decode("latin-1")
            at += 4 + size
            size = int.from_bytes(raw[at : at + 4], "big")
            value = raw[at + 4 : at + 4 + size].decode("latin-1")
            at += 4 + size
            # Several values of one name are joined by NUL; the first serves here.
            headers[name.lower()] = value.split("\0")[0]
        return headers


def _id(raw: bytes) -> int:
    return int.from_bytes(raw, "big") & 0x7FFFFFFF


class FrameWriter:
    """Frames to bytes, with the connection's header compression context."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def _control(self, kind: int, flags: int, body: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
            for k, v in headers.items()
        )
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        return self._control(
            SYN_REPLY, 0, struct.pack(">I", stream_id) + self._block(headers or {})
        )

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream: int) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream, 0))

    def data(self, stream_id: int, data: bytes, *, fin: bool = False) -> list[bytes]:
        """DATA frames for ``data`` (at least one, so an empty ``fin`` frame closes)."""
        pieces = [data[i : i + MAX_DATA] for i in range(0, len(data), MAX_DATA)] or [b""]
        out = []
        for i, piece in enumerate(pieces):
            flags = FLAG_FIN if fin and i == len(pieces) - 1 else 0
            out.append(struct.pack(">II", stream_id, (flags << 24) | len(piece)) + piece)
        return out
