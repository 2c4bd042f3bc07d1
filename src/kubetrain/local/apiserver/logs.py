"""``pods/log``: the executor's log files, served and followed.

Files: ``<logs>/<namespace>/<pod>/<container>.log`` for the running (or last) instance and
``<container>.<n>.log`` for earlier instances; ``previous`` serves the highest ``n``. Following
polls the file and ends when the pod has finished (Succeeded/Failed), is deleted, or the
server shuts down. ``timestamps`` stamps each line with the time it was read (the files carry no
times of their own).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.api.access import dicts, obj_at
from kubetrain.api.labels import LOG_ALIASES_ANNOTATION
from kubetrain.local.apiserver import errors as E

__all__ = ["LogRequest", "log_file", "pick_container", "stream_log"]

_POLL_S = 0.1


class LogRequest:
    """Query options of a log request, parsed."""

    def __init__(self, query: Any) -> None:
        self.container: str = query.get("container", "")
        self.follow = _bool(query.get("follow"))
        self.previous = _bool(query.get("previous"))
        self.timestamps = _bool(query.get("timestamps"))
        self.tail_lines = _int(query.get("tailLines"), "tailLines", 0)
        self.limit_bytes = _int(query.get("limitBytes"), "limitBytes", 1)


def _bool(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _int(value: str | None, name: str, least: int) -> int | None:
    if value in (None, ""):
        return None
    try:
        number = int(str(value))
    except ValueError as exc:
        raise E.bad_request(f"{name}: invalid integer {value!r}") from exc
    if number < least:
        # PodLogOptions validation: tailLines >= 0, limitBytes > 0.
        raise E.bad_request(f"{name}: Invalid value: {number}: must be at least {least}")
    return number


def pick_container(pod: dict[str, Any], wanted: str) -> str:
    """The container a request means; 400 when ambiguous or unknown, like the kubelet."""
    spec = obj_at(pod, "spec")
    names = [c.get("name", "") for c in dicts(spec.get("containers"))]
    init_names = [c.get("name", "") for c in dicts(spec.get("initContainers"))]
    name = str(pod["metadata"]["name"])
    if wanted:
        alias = _aliases(pod).get(wanted)
        if wanted not in names and alias in names:
            return str(alias)
        if wanted not in names and wanted not in init_names:
            raise E.bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    default = obj_at(pod, "metadata", "annotations").get("kubectl.kubernetes.io/default-container")
    if default in names:
        return str(default)
    if len(names) == 1:
        return str(names[0])
    raise E.bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
        + (f" or one of the init containers: [{' '.join(init_names)}]" if init_names else "")
    )


def _aliases(pod: dict[str, Any]) -> dict[str, str]:
    """A pod's log aliases (``alias=container,...``): another name for a container's log."""
    text = obj_at(pod, "metadata", "annotations").get(LOG_ALIASES_ANNOTATION) or ""
    pairs = (item.partition("=") for item in str(text).split(",") if "=" in item)
    return {alias.strip(): target.strip() for alias, _, target in pairs}


def log_file(
    logs_dir: Path, namespace: str, pod: str, container: str, previous: bool
) -> Path | None:
    folder = logs_dir / namespace / pod
    if not previous:
        return folder / f"{container}.log"
    pattern = re.compile(rf"^{re.escape(container)}\.(\d+)\.log$")
    found = [
        (int(m.group(1)), p)
        for p in folder.glob(f"{container}.*.log")
        if (m := pattern.match(p.name))
    ]
    return max(found)[1] if found else None


def _stamp(line: bytes) -> bytes:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode() + b" " + line


async def stream_log(
    path: Path,
    req: LogRequest,
    finished: Callable[[], bool],
    closing: Callable[[], bool],
) -> AsyncIterator[bytes]:
    """The file's content (tail first), then, when following, what is appended until ``finished()``."""
    loop = asyncio.get_running_loop()
    data = await loop.run_in_executor(None, _read_from, path, 0)
    offset = len(data)
    if req.tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-req.tail_lines :]) if req.tail_lines > 0 else b""
    sent = 0
    pending = b""

    def emit(chunk: bytes) -> bytes:
        nonlocal sent, pending
        if req.timestamps:
            chunk = pending + chunk
            lines = chunk.splitlines(keepends=True)
            pending = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
            chunk = b"".join(_stamp(line) for line in lines)
        if req.limit_bytes is not None:
            chunk = chunk[: max(req.limit_bytes - sent, 0)]
        sent += len(chunk)
        return chunk

    out = emit(data)
    if out:
        yield out
    while req.follow and not closing():
        if req.limit_bytes is not None and sent >= req.limit_bytes:
            break
        done = finished()
        if _size(path) < offset:
            offset = 0  # the file was replaced (a restarted container): start it over
        more = await loop.run_in_executor(None, _read_from, path, offset)
        if more:
            offset += len(more)
            out = emit(more)
            if out:
                yield out
        elif done:
            break
        else:
            await asyncio.sleep(_POLL_S)
    if pending:
        yield _stamp(pending)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read()
    except FileNotFoundError:
        return b""
