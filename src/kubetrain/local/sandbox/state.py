"""The small JSON record that lets a restarted daemon find a container again.

One file per container in ``<pod_dir>/state/``, written right after start. The exit code is
written by whoever is the container's parent: bwrap itself (``--json-status-fd``) or the
plain mode's reaper (`reaper.REAPER`), so it survives the daemon.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ContainerState", "read_exit_code", "read_states", "write_state"]


@dataclass(frozen=True)
class ContainerState:
    container: str
    restart_count: int
    init: bool
    pid: int
    pgid: int
    start_time: int
    mode: str
    log: str
    status_file: str
    started_at: float = 0.0  # wall clock (epoch seconds), for the Pod's containerStatuses


def write_state(path: Path, state: ContainerState) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=1))
    os.replace(tmp, path)  # atomic: a crash never leaves half a record


def read_states(pod_dir: Path) -> list[ContainerState]:
    out = []
    for path in sorted((pod_dir / "state").glob("*.json")):
        try:
            out.append(ContainerState(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return out


def read_exit_code(status_file: Path) -> int | None:
    """The last ``exit-code`` in a bwrap-style JSON status stream, if the process has ended."""
    try:
        text = status_file.read_text()
    except OSError:
        return None
    code = None
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            obj, i = decoder.raw_decode(text, i)
        except ValueError:
            break
        if isinstance(obj, dict) and "exit-code" in obj:
            code = int(obj["exit-code"])
    return code
