"""A small line-chart PNG writer with no dependencies, for ``kubetrain metrics --plot``.

matplotlib draws nicer charts and is used when installed; without it the CLI still writes a
readable picture: one panel per series, a frame, the series as a polyline, and the name with
the first, last, lowest and highest values in a 3x5 pixel font (scaled x2). PNG encoding is
zlib plus four chunk headers.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Series", "write_png_chart"]

Series = tuple[str, Sequence[float], Sequence[float]]  # (name, xs, ys)

WIDTH, PANEL_H, MARGIN, SCALE = 720, 160, 14, 2
_BG, _FRAME, _TEXT = (255, 255, 255), (170, 170, 170), (40, 40, 40)
_COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189)]

# 3x5 glyphs, rows top to bottom, 3 bits a row (4 = left pixel).
_FONT: dict[str, tuple[int, ...]] = {
    "0": (7, 5, 5, 5, 7),
    "1": (2, 6, 2, 2, 7),
    "2": (7, 1, 7, 4, 7),
    "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1),
    "5": (7, 4, 7, 1, 7),
    "6": (7, 4, 7, 5, 7),
    "7": (7, 1, 2, 2, 2),
    "8": (7, 5, 7, 5, 7),
    "9": (7, 5, 7, 1, 7),
    ".": (0, 0, 0, 0, 2),
    "-": (0, 0, 7, 0, 0),
    "+": (0, 2, 7, 2, 0),
    "%": (5, 1, 2, 4, 5),
    ":": (0, 2, 0, 2, 0),
    "_": (0, 0, 0, 0, 7),
    "=": (0, 7, 0, 7, 0),
    "/": (1, 1, 2, 4, 4),
    " ": (0, 0, 0, 0, 0),
    "e": (7, 5, 7, 4, 7),
    "a": (2, 5, 7, 5, 5),
    "b": (6, 5, 6, 5, 6),
    "c": (7, 4, 4, 4, 7),
    "d": (6, 5, 5, 5, 6),
    "f": (7, 4, 6, 4, 4),
    "g": (7, 4, 5, 5, 7),
    "h": (5, 5, 7, 5, 5),
    "i": (7, 2, 2, 2, 7),
    "j": (1, 1, 1, 5, 7),
    "k": (5, 5, 6, 5, 5),
    "l": (4, 4, 4, 4, 7),
    "m": (5, 7, 7, 5, 5),
    "n": (6, 5, 5, 5, 5),
    "o": (7, 5, 5, 5, 7),
    "p": (7, 5, 7, 4, 4),
    "q": (7, 5, 5, 7, 1),
    "r": (6, 5, 6, 5, 5),
    "s": (7, 4, 7, 1, 7),
    "t": (7, 2, 2, 2, 2),
    "u": (5, 5, 5, 5, 7),
    "v": (5, 5, 5, 5, 2),
    "w": (5, 5, 7, 7, 5),
    "x": (5, 5, 2, 5, 5),
    "y": (5, 5, 2, 2, 2),
    "z": (7, 1, 2, 4, 7),
}


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(_BG) * (width * height))

    def dot(self, x: int, y: int, colour: tuple[int, int, int]) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(colour)

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int]) -> None:
        # Bresenham, drawn two pixels thick so thin curves stay visible.
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            self.dot(x0, y0, colour)
            self.dot(x0, y0 + 1, colour)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int]) -> None:
        for x in range(x0, x1 + 1):
            self.dot(x, y0, colour)
            self.dot(x, y1, colour)
        for y in range(y0, y1 + 1):
            self.dot(x0, y, colour)
            self.dot(x1, y, colour)

    def text(self, x: int, y: int, text: str, colour: tuple[int, int, int] = _TEXT) -> None:
        for ch in text.lower():
            rows = _FONT.get(ch, _FONT["_"])
            for r, bits in enumerate(rows):
                for c in range(3):
                    if bits & (4 >> c):
                        for dy in range(SCALE):
                            for dx in range(SCALE):
                                self.dot(x + c * SCALE + dx, y + r * SCALE + dy, colour)
            x += 4 * SCALE

    def png(self) -> bytes:
        raw = b"".join(
            b"\x00" + bytes(self.pixels[y * self.width * 3 : (y + 1) * self.width * 3])
            for y in range(self.height)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (
                struct.pack(">I", len(data))
                + kind
                + data
                + struct.pack(">I", zlib.crc32(kind + data))
            )

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def _num(v: float) -> str:
    return f"{v:.4g}"


def write_png_chart(series: Sequence[Series], path: Path, *, title: str = "") -> None:
    """One panel per series, stacked; x runs left to right over each series' own range."""
    top = MARGIN + (8 * SCALE if title else 0)
    canvas = _Canvas(WIDTH, top + len(series) * (PANEL_H + MARGIN))
    if title:
        canvas.text(MARGIN, MARGIN // 2, title)
    for n, (name, xs, ys) in enumerate(series):
        colour = _COLOURS[n % len(_COLOURS)]
        y0 = top + n * (PANEL_H + MARGIN)
        label_h = 7 * SCALE
        frame = (MARGIN, y0 + label_h, WIDTH - MARGIN, y0 + PANEL_H)
        canvas.rect(*frame, _FRAME)
        lo, hi = min(ys), max(ys)
        canvas.text(
            MARGIN, y0,
            f"{name}  first {_num(ys[0])}  last {_num(ys[-1])}  min {_num(lo)}  max {_num(hi)}",
            colour,
        )  # fmt: skip
        x_lo, x_hi = min(xs), max(xs)
        inner_w, inner_h = frame[2] - frame[0] - 8, frame[3] - frame[1] - 8

        x_span, y_span = x_hi - x_lo, hi - lo
        points = [
            (
                frame[0] + 4 + round(((x - x_lo) / x_span if x_span else 0.5) * inner_w),
                frame[3] - 4 - round(((y - lo) / y_span if y_span else 0.5) * inner_h),
            )
            for x, y in zip(xs, ys, strict=True)
        ]
        if len(points) == 1:
            canvas.rect(
                points[0][0] - 2, points[0][1] - 2, points[0][0] + 2, points[0][1] + 2, colour
            )
        for (ax, ay), (bx, by) in itertools.pairwise(points):
            canvas.line(ax, ay, bx, by, colour)
    path.write_bytes(canvas.png())
