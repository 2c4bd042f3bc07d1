"""Issue 13, finding 10: reading a log holds at most one bounded piece of a line at a time,
however long the line a program printed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubetrain.kube.lines import MAX_LOG_LINE, bounded_lines


def _chunks(data: bytes, size: int = 7) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"a\nbb\n", ["a", "bb"]),
        (b"a\r\nb", ["a", "b"]),
        (b"\n\n", ["", ""]),
        (b"caf\xc3\xa9\n", ["café"]),
    ],
    ids=["lines", "CRLF and a last line without newline", "empty lines", "UTF-8 across chunks"],
)
def test_lines_come_out_as_written(data: bytes, lines: list[str]) -> None:
    assert list(bounded_lines(_chunks(data))) == lines


def test_finding_10_a_huge_line_without_newlines_comes_in_bounded_pieces() -> None:
    size = 20 * MAX_LOG_LINE + 5
    chunks = (b"x" * 65536 for _ in range(size // 65536))
    tail = [b"x" * (size % 65536) + b"\nend\n"]
    pieces = list(bounded_lines([*chunks, *tail]))
    assert pieces[-1] == "end"
    assert all(len(p) <= MAX_LOG_LINE for p in pieces)
    assert sum(len(p) for p in pieces[:-1]) == size
