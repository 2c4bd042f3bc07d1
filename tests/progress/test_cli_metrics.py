"""``kubetrain metrics``: the series as rows, CSV columns, and its curves drawn with matplotlib."""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest

from kubetrain.cli.cmd_metrics import metric_names, plot_png, rows
from kubetrain.client.errors import ClientError
from kubetrain.local.history import Point

POINTS = [
    Point(100.0, "2026-11-29T10:00:00Z", 10, None, {"loss": "1.8", "epoch": "1"}),
    Point(130.0, "2026-11-29T10:00:30Z", 50, 30, {"loss": "0.9", "epoch": "5", "note": "warm"}),
    Point(160.0, "2026-11-29T10:01:00Z", 100, 0, {"loss": "0.05", "epoch": "10"}),
]


def test_metric_names_in_order_of_first_appearance() -> None:
    assert metric_names(POINTS) == ["loss", "epoch", "note"]
    assert metric_names(POINTS, ["note", "loss"]) == ["loss", "note"]


def test_rows_leave_missing_values_empty() -> None:
    assert rows(POINTS, ["loss", "note"]) == [
        ["2026-11-29T10:00:00Z", "10", "", "1.8", ""],
        ["2026-11-29T10:00:30Z", "50", "30", "0.9", "warm"],
        ["2026-11-29T10:01:00Z", "100", "0", "0.05", ""],
    ]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    crc = struct.unpack(">I", data[16 + length : 20 + length])[0]
    assert crc == zlib.crc32(data[12 : 16 + length])
    return width, height


def test_without_matplotlib_plotting_is_a_clear_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(
        ClientError, match=r"matplotlib, which is not installed: .*kubetrain\[plot\]"
    ):
        plot_png(POINTS, metric_names(POINTS), tmp_path / "curves.png", title="trainjob/demo")
    assert not (tmp_path / "curves.png").exists()


def test_with_matplotlib_it_draws_one_panel_per_numeric_metric_and_progress(tmp_path: Path) -> None:
    out = tmp_path / "curves.png"
    plot_png(POINTS, metric_names(POINTS), out, title="trainjob/demo")
    width, height = _png_size(out.read_bytes())
    # 8 in wide at 100 dpi; loss, epoch and progress panels (2.2 in each) plus the title.
    assert (width, height) == (800, 720)


def test_nothing_to_plot_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="no progress reports"):
        plot_png([], [], tmp_path / "x.png", title="t")
    text_only = [Point(1.0, "t", None, None, {"note": "warm"})]
    with pytest.raises(ClientError, match="no numeric metrics"):
        plot_png(text_only, ["note"], tmp_path / "x.png", title="t")
