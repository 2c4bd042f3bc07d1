"""Splitting a byte stream into lines, with an optional bound on a line's length.

Watch streams and pod logs are newline-delimited; a program may print 200 MB without a newline,
and a reader must then hold one bounded piece at a time, not the whole line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["MAX_LOG_LINE", "LineSplitter", "bounded_lines"]

MAX_LOG_LINE = 1024 * 1024


class LineSplitter:
    """Feed chunks, get whole lines (without ``\\n``); a line longer than ``limit`` bytes comes
    out in pieces of ``limit``. Empty lines are dropped unless ``keep_empty``."""

    def __init__(self, *, limit: int | None = None, keep_empty: bool = False) -> None:
        self._pending = bytearray()
        self._limit = limit
        self._keep_empty = keep_empty

    def feed(self, chunk: bytes) -> list[bytes]:
        pending = self._pending
        pending += chunk
        out: list[bytes] = []
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            line = bytes(pending[start:end])
            start = end + 1
            if self._keep_empty or line.strip():
                out.append(line)
        del pending[:start]
        if self._limit is not None:
            while len(pending) >= self._limit:
                out.append(bytes(pending[: self._limit]))
                del pending[: self._limit]
        return out

    def end(self) -> list[bytes]:
        """What is left when the stream ends (a last line without a newline)."""
        rest = bytes(self._pending)
        self._pending.clear()
        return [rest] if rest.strip() or (self._keep_empty and rest) else []


def decode_line(line: bytes) -> str:
    return (line[:-1] if line.endswith(b"\r") else line).decode(errors="replace")


def bounded_lines(chunks: Iterable[bytes], limit: int = MAX_LOG_LINE) -> Iterator[str]:
    """Text lines of a byte stream (newlines dropped), none longer than ``limit`` bytes."""
    splitter = LineSplitter(limit=limit, keep_empty=True)
    for chunk in chunks:
        for line in splitter.feed(chunk):
            yield decode_line(line)
    for line in splitter.end():
        yield decode_line(line)
