"""The data-cache example's training script (from its trainjob.yaml), run as 2 torch ranks
against a real cache: each rank gets half the rows, every epoch, and together they are the
whole table (row counts and checksums)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.sandbox import sandbox_mode

pytest.importorskip("torch")
# Where bubblewrap runs pods, test_datacache_engine runs this same script from trainjob.yaml as
# the TrainJob's 2 torch nodes and asserts all of this and more: training it twice costs a minute
# of the suite. Here it runs where that test cannot.
pytestmark = pytest.mark.skipif(
    sandbox_mode().mode == "bwrap",
    reason="test_datacache_engine trains this script through the engine and checks the same",
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data-cache"


def training_script() -> str:
    job = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    command = job["spec"]["trainer"]["command"][2]
    match = re.search(r"<<'TRAIN_PY'\n(.*?)\nTRAIN_PY\n", command, re.S)
    assert match is not None, "trainjob.yaml's command holds the script in a TRAIN_PY heredoc"
    return match.group(1)


def test_two_ranks_stream_disjoint_halves_that_make_the_whole_table(
    cache: Any, iceberg_table: Any, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(training_script())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rows = iceberg_table.rows.num_rows
    procs = []
    for rank in range(2):
        env = {
            **os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "CACHE_ENDPOINT": cache.endpoint,
        }  # fmt: skip
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), "--rows", str(rows)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    for epoch in range(2):
        counts = [
            int(re.search(rf"epoch {epoch} rank {r} rows (\d+)", outputs[r]).group(1))  # type: ignore[union-attr]
            for r in range(2)
        ]
        assert counts == [rows // 2, rows - rows // 2]
        assert (
            f"epoch {epoch} all 2 ranks: rows {rows} checksum {rows * (rows - 1) // 2}: "
            "the whole table" in outputs[0]
        )
