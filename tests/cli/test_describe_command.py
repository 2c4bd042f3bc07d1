"""``describe`` shows a TrainJob's command on one line, however long the embedded script is."""

from __future__ import annotations

import pytest

from kubetrain.cli.cmd_describe import _short_command


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        pytest.param([], "", id="no command shows nothing"),
        pytest.param(
            ["torchrun", "train.py"], "torchrun train.py", id="a one-line command is shown whole"
        ),
        pytest.param(
            ["bash", "-c", "cat > /tmp/t.py <<'PY'\nprint(1)\nPY\ntorchrun /tmp/t.py"],
            "bash -c 'cat > /tmp/t.py <<'\"'\"'PY'\"'\"' … (3 more lines)",
            id="a heredoc script shows its first line and how many follow",
        ),
    ],
)
def test_the_command_line(command: list[object], shown: str) -> None:
    assert _short_command(command) == shown
