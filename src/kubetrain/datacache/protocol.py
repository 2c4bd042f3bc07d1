"""Upstream's data-cache wire facts, as pure functions: no I/O.

- A ticket (and the endpoint's ``app_metadata``) is ``IndexPair{start: u64, end: u64}`` in
  bincode 2's standard configuration: little-endian, each integer variable-length (one byte
  below 251; else a marker byte 251/252/253 and a 2/4/8-byte value). Both ends inclusive.
- Rank ``i`` of ``W`` gets rows ``[i*ceil(N/W), min((i+1)*ceil(N/W), N) - 1]``; a rank past
  the end gets no range (upstream answers ``OUT_OF_RANGE``).
- The head spreads the table's data files over the workers largest first, each to the
  worker with the fewest rows so far; worker ``k`` then holds rows ``[start_k, end_k]`` in
  file order, ``start_k`` being the rows of workers ``0..k-1``.
- Worker ``k`` (0-based) is the LWS pod of worker index ``k+1``: the leader address's first
  label plus ``-<k+1>``, port 50051.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CACHE_PORT",
    "HEALTH_PORT",
    "FileGroup",
    "IndexPair",
    "ProtocolError",
    "decode_pair",
    "encode_pair",
    "group_files",
    "partition_range",
    "worker_addresses",
]

CACHE_PORT = 50051
HEALTH_PORT = 8080

_U16, _U32, _U64 = 251, 252, 253


class ProtocolError(ValueError):
    """A message that does not follow upstream's protocol."""


@dataclass(frozen=True)
class IndexPair:
    """Rows ``start`` to ``end``, both included."""

    start: int
    end: int

    @property
    def rows(self) -> int:
        return self.end - self.start + 1


def _varint(value: int) -> bytes:
    if not 0 <= value < 1 << 64:
        raise ProtocolError(f"{value} does not fit in a u64")
    if value < _U16:
        return bytes([value])
    if value < 1 << 16:
        return bytes([_U16]) + value.to_bytes(2, "little")
    if value < 1 << 32:
        return bytes([_U32]) + value.to_bytes(4, "little")
    return bytes([_U64]) + value.to_bytes(8, "little")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(data):
        raise ProtocolError("ticket ends inside an integer")
    marker = data[pos]
    if marker < _U16:
        return marker, pos + 1
    width = {_U16: 2, _U32: 4, _U64: 8}.get(marker)
    if width is None or pos + 1 + width > len(data):
        raise ProtocolError(f"bad integer marker {marker} at byte {pos}")
    return int.from_bytes(data[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def encode_pair(pair: IndexPair) -> bytes:
    return _varint(pair.start) + _varint(pair.end)


def decode_pair(data: bytes) -> IndexPair:
    """The pair a ticket holds; `ProtocolError` for anything else (trailing bytes allowed,
    as bincode's ``decode_from_slice`` allows them)."""
    start, pos = _read_varint(data, 0)
    end, _ = _read_varint(data, pos)
    return IndexPair(start, end)


def partition_range(total_rows: int, world: int, rank: int) -> IndexPair | None:
    """The rows of ``rank`` out of ``world``; None where upstream has none to give."""
    if total_rows <= 0 or world <= 0 or not 0 <= rank < world:
        return None
    per_rank = -(-total_rows // world)
    start = rank * per_rank
    if start >= total_rows:
        return None
    return IndexPair(start, min(start + per_rank, total_rows) - 1)


@dataclass(frozen=True)
class FileGroup:
    """What one worker loads: ``paths`` in this order, holding rows ``[start, end]``."""

    worker: int
    paths: tuple[str, ...]
    start: int
    end: int

    @property
    def rows(self) -> int:
        return self.end - self.start + 1 if self.paths else 0


def group_files(files: Sequence[tuple[str, int]], workers: int) -> list[FileGroup]:
    """``files`` (path, record count) spread over ``workers`` as upstream's head does."""
    if workers <= 0:
        raise ProtocolError("the cache needs at least one worker")
    paths: list[list[str]] = [[] for _ in range(workers)]
    sizes = [0] * workers
    # Stable sort: equal sizes keep the table's order, as Rust's sort_by_key does.
    for path, rows in sorted(files, key=lambda f: -f[1]):
        k = min(range(workers), key=lambda i: sizes[i])
        paths[k].append(path)
        sizes[k] += rows
    groups, end = [], 0
    for k in range(workers):
        start = end
        end += sizes[k]
        groups.append(FileGroup(k, tuple(paths[k]), start, end - 1 if end else 0))
    return groups


def worker_addresses(leader_address: str, group_size: int, port: int = CACHE_PORT) -> list[str]:
    """``host:port`` of each worker of the LWS group whose leader is ``leader_address``."""
    first, _, rest = leader_address.partition(".")
    if not first or group_size < 2:
        raise ProtocolError(
            f"LWS_LEADER_ADDRESS={leader_address!r}, LWS_GROUP_SIZE={group_size}: "
            "a cache group needs a leader address and at least one worker"
        )
    suffix = f".{rest}" if rest else ""
    return [f"{first}-{i}{suffix}:{port}" for i in range(1, group_size)]
