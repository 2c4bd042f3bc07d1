"""The rule that decides how many ranged streams a large object gets, window by window, and
where the new ranges are cut. Pure: measured rates in, decisions out."""

from __future__ import annotations

import pytest

from kubetrain.initializers.ramp import Ramp, split_points

# Each window: (aggregate rate, splittable streams, how many could be split now) -> decision
# (+n: add n ranged streams, -n: take the trial's n back, 0: as it is).
Window = tuple[float, int, int, int]


@pytest.mark.parametrize(
    "windows",
    [
        pytest.param(
            [(100, 1, 31, 1), (200, 2, 30, 2), (390, 4, 28, 4), (700, 8, 24, 8)],
            id="where parallel ranges pay, the streams double while the rate rises",
        ),
        pytest.param(
            [(160, 1, 31, 1), (53, 2, 30, -1), (160, 1, 31, 0), (170, 1, 31, 0)],
            id="where a range costs the whole object, the first split is taken back and none is tried again",
        ),
        pytest.param(
            [(100, 1, 31, 1), (150, 2, 30, 2), (160, 4, 28, 0), (300, 4, 28, 0)],
            id="a gain under 15% keeps the new streams and tries no more",
        ),
        pytest.param(
            [(100, 1, 31, 1), (90, 2, 30, 0)],
            id="a loss under 15% is noise: the new streams stay, none are added",
        ),
        pytest.param(
            [(100, 1, 0, 0), (50, 1, 0, 0), (60, 1, 31, 1), (66, 2, 30, 0)],
            id="with no thread free nothing is tried, and the baseline follows the rate",
        ),
        pytest.param(
            [(100, 4, 2, 2), (130, 6, 0, 0), (130, 6, 3, 3)],
            id="a doubling is capped by what can be split now, and resumes when more can",
        ),
        pytest.param(
            [(0, 1, 31, 0), (80, 1, 31, 1)],
            id="a window without bytes (all still waiting for a first byte) measures nothing",
        ),
        pytest.param(
            [(50, 0, 0, 0), (40, 0, 0, 0)],
            id="many small objects and no large one: nothing to split",
        ),
    ],
)
def test_the_ramp_adds_streams_only_while_the_aggregate_rate_rises(
    windows: list[Window],
) -> None:
    ramp = Ramp()
    decisions = [ramp.step(rate, active, possible) for rate, active, possible, _ in windows]
    assert decisions == [want for *_, want in windows]


@pytest.mark.parametrize(
    ("spans", "n", "cuts"),
    [
        pytest.param([(0, 0, 31)], 4, [], id="a rest under two parts is never cut"),
        pytest.param([(0, 0, 1000)], 1, [(0, 500)], id="one cut halves the rest"),
        pytest.param(
            [(0, 0, 64)],
            3,
            [(0, 32), (0, 16), (0, 48)],
            id="a half is cut again when it is still the largest piece",
        ),
        pytest.param(
            [(0, 0, 40), (1, 10, 100)],
            2,
            [(1, 55), (1, 32)],
            id="the largest rest is cut first, whatever object it belongs to",
        ),
        pytest.param(
            [(0, 70, 100), (1, 0, 64)],
            4,
            [(1, 32), (1, 16), (1, 48)],
            id="cuts stop where no piece has two parts left, even with threads to spare",
        ),
    ],
)
def test_new_ranges_halve_the_largest_rest(
    spans: list[tuple[int, int, int]], n: int, cuts: list[tuple[int, int]]
) -> None:
    assert split_points(spans, n, min_part=16) == cuts
