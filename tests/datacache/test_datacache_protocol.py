"""Upstream's wire facts as pure functions: tickets, rank ranges, file groups, worker names."""

from __future__ import annotations

import pytest

from kubetrain.datacache.protocol import (
    FileGroup,
    IndexPair,
    ProtocolError,
    decode_pair,
    encode_pair,
    group_files,
    partition_range,
    worker_addresses,
)


@pytest.mark.parametrize(
    ("pair", "wire"),
    [
        pytest.param(IndexPair(0, 24), bytes([0, 24]), id="small numbers are one byte each"),
        pytest.param(IndexPair(250, 251), bytes([250, 251, 251, 0]), id="251 takes a u16 marker"),
        pytest.param(
            IndexPair(65_536, 4_294_967_296),
            bytes([252, 0, 0, 1, 0, 253, 0, 0, 0, 0, 1, 0, 0, 0]),
            id="u32 and u64 markers, little-endian",
        ),
    ],
)
def test_tickets_are_bincode_standard_index_pairs(pair: IndexPair, wire: bytes) -> None:
    assert encode_pair(pair) == wire
    assert decode_pair(wire) == pair


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"", id="an empty ticket"),
        pytest.param(bytes([7]), id="a ticket without its end"),
        pytest.param(bytes([254, 1]), id="an unknown integer marker"),
        pytest.param(bytes([251, 1]), id="a u16 cut short"),
    ],
)
def test_a_malformed_ticket_is_a_protocol_error(wire: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_pair(wire)


@pytest.mark.parametrize(
    ("total", "world", "rank", "expected"),
    [
        pytest.param(100, 4, 0, IndexPair(0, 24), id="the first of four gets rows 0-24"),
        pytest.param(100, 4, 3, IndexPair(75, 99), id="the last of four gets rows 75-99"),
        pytest.param(10, 3, 2, IndexPair(8, 9), id="the last rank gets what is left"),
        pytest.param(3, 4, 3, None, id="a rank past the end gets nothing"),
        pytest.param(0, 4, 0, None, id="an empty table has no ranges"),
        pytest.param(100, 4, 4, None, id="a rank beyond the world has no range"),
    ],
)
def test_rank_ranges_split_the_rows_as_upstreams_head(
    total: int, world: int, rank: int, expected: IndexPair | None
) -> None:
    assert partition_range(total, world, rank) == expected


def test_every_row_is_in_exactly_one_rank_range() -> None:
    for total in (1, 7, 100, 1001):
        for world in (1, 2, 3, 8):
            ranges = [partition_range(total, world, r) for r in range(world)]
            rows = [i for p in ranges if p for i in range(p.start, p.end + 1)]
            assert rows == list(range(total))


def test_files_go_largest_first_to_the_least_loaded_worker() -> None:
    files = [("a", 10), ("b", 40), ("c", 30), ("d", 20)]
    assert group_files(files, 2) == [
        FileGroup(0, ("b", "a"), 0, 49),
        FileGroup(1, ("c", "d"), 50, 99),
    ]


def test_a_worker_without_files_holds_no_rows() -> None:
    groups = group_files([("a", 5)], 2)
    assert groups[1].paths == () and groups[1].rows == 0


@pytest.mark.parametrize(
    ("leader", "size", "expected"),
    [
        pytest.param(
            "job-cache-0.job-cache.ns",
            3,
            ["job-cache-0-1.job-cache.ns:50051", "job-cache-0-2.job-cache.ns:50051"],
            id="workers are the leader's name with their index, in the same subdomain",
        ),
        pytest.param("leader", 2, ["leader-1:50051"], id="a bare leader host name"),
    ],
)
def test_worker_addresses_follow_the_lws_names(leader: str, size: int, expected: list[str]) -> None:
    assert worker_addresses(leader, size) == expected


def test_a_group_without_workers_is_refused() -> None:
    with pytest.raises(ProtocolError, match="at least one worker"):
        worker_addresses("leader.ns", 1)
