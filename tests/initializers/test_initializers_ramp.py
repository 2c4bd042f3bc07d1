"""The rule that decides how many ranged streams a large object gets, window by window, when
a window is over, how large a piece must be to get a stream of its own, and where the new
ranges are cut. Pure: measured rates and times in, decisions out."""

from __future__ import annotations

import pytest

from kubetrain.initializers.ramp import Ramp, min_piece, split_points

# Each window: (aggregate rate, splittable streams, how many could be split now) -> decision
# (+n: add n ranged streams, -n: take the trial's n back, 0: as it is).
Window = tuple[float, int, int, int]


@pytest.mark.parametrize(
    "windows",
    [
        pytest.param(
            [(100, 1, 31, 3), (300, 4, 28, 4), (480, 8, 24, 8), (800, 16, 16, 16)],
            id="where parallel ranges pay, the first trial makes four streams, then they double while each new one brings half a stream's worth",
        ),
        pytest.param(
            [(100, 1, 31, 3), (200, 4, 28, 0), (190, 4, 28, 0), (400, 4, 28, 0)],
            id="four streams at 2x one (a third of a stream's worth each new one) stay, and eight are never tried",
        ),
        pytest.param(
            [(100, 1, 31, 3), (200, 4, 28, 0), (260, 4, 28, 4)],
            id="a first trial's marginal window is measured again, and a clear second one goes on to eight",
        ),
        pytest.param(
            [(100, 1, 31, 3), (300, 4, 28, 4), (450, 8, 24, 8)],
            id="four to eight streams needs 1.5x (half a stream's worth each) to be followed by another",
        ),
        pytest.param(
            [(160, 1, 31, 3), (53, 4, 28, 0), (60, 4, 28, -3), (160, 1, 31, 0), (170, 1, 31, 0)],
            id="two windows slower by 15% or more: the split is taken back and none is tried again",
        ),
        pytest.param(
            [(100, 1, 31, 3), (300, 4, 28, 4), (320, 8, 24, 0), (330, 8, 24, 0), (600, 8, 24, 0)],
            id="a gain under 15% in two windows keeps the new streams and tries no more",
        ),
        pytest.param(
            [(100, 1, 31, 3), (40, 4, 28, 0), (300, 4, 28, 4), (480, 8, 24, 8)],
            id="a window in which every stream stalled does not decide a trial alone",
        ),
        pytest.param(
            [(100, 1, 31, 3), (90, 4, 28, 0), (95, 4, 28, 0)],
            id="a loss under 15% is noise: the new streams stay, none are added",
        ),
        pytest.param(
            [(100, 1, 0, 0), (50, 1, 0, 0), (60, 1, 31, 3), (66, 4, 28, 0), (60, 4, 28, 0)],
            id="with no thread free nothing is tried, and the baseline follows the rate",
        ),
        pytest.param(
            [(100, 1, 1, 1), (200, 2, 30, 2)],
            id="a first trial that can make fewer than four streams makes what it can",
        ),
        pytest.param(
            [(100, 4, 2, 2), (130, 6, 0, 0), (130, 6, 3, 3)],
            id="a doubling is capped by what can be split now, and resumes when more can",
        ),
        pytest.param(
            [(100, 4, 2, 2), (120, 6, 0, 0), (124, 6, 3, 0)],
            id="a trial capped below a doubling is held to half a stream's worth for each new one",
        ),
        pytest.param(
            [(0, 1, 31, 0), (80, 1, 31, 3)],
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


def test_a_trial_whose_streams_never_began_is_taken_back_and_ends_the_ramp() -> None:
    ramp = Ramp()
    assert ramp.step(100, 1, 31) == 3
    assert ramp.step(100, 4, 28, waiting=1) == -3  # however fast the rest went meanwhile
    assert ramp.step(300, 1, 31) == 0


# Each tick: (seconds, bytes done, trial streams without a first byte) -> the window's rate,
# or None while it goes on. Windows of 1 s; a trial waits 4 windows at most.
Tick = tuple[float, int, int, float | None]


@pytest.mark.parametrize(
    ("ticks", "trial"),
    [
        pytest.param(
            [(0.0, 0, 0, None), (0.5, 0, 0, None), (0.7, 10, 0, None), (1.5, 50, 0, None),
             (1.7, 70, 0, 60.0)],
            0,
            id="the first window begins at the first bytes, not at the start",
        ),
        pytest.param(
            [(0.0, 10, 0, None), (1.0, 110, 0, 100.0), (1.5, 160, 0, None), (2.0, 210, 0, 100.0)],
            0,
            id="each window lasts its length and the next begins where it ended",
        ),
        pytest.param(
            [(0.0, 10, 0, None), (1.0, 110, 2, 100.0), (1.5, 150, 2, None), (2.0, 190, 0, None),
             (2.5, 290, 0, None), (3.0, 390, 0, 200.0)],
            1,
            id="a trial's window begins once its streams have their first bytes",
        ),
        pytest.param(
            [(0.0, 10, 0, None), (1.0, 110, 1, 100.0), (3.0, 310, 1, None),
             (5.0, 510, 1, 0.0)],
            1,
            id="a trial's window ends after four windows with a stream still without a first byte",
        ),
    ],
)  # fmt: skip
def test_a_window_is_over_when_its_rate_means_something(ticks: list[Tick], trial: int) -> None:
    ramp = Ramp(window_s=1.0)
    rates = []
    for i, (now, done, waiting, _) in enumerate(ticks):
        rates.append(ramp.measure(now, done, waiting))
        if rates[-1] is not None and i == 1:
            ramp.trial = trial  # the first window's decision began a trial
    assert rates == [want for *_, want in ticks]


@pytest.mark.parametrize(
    ("rate", "streams", "first_byte_s", "piece"),
    [
        pytest.param(400e6, 1, 0.02, 40_000_000, id="a quick first byte: pieces of a tenth of a second"),
        pytest.param(400e6, 1, 0.001, 16_000_000, id="never below the floor"),
        pytest.param(400e6, 4, 0.02, 16_000_000, id="each of several streams gets a share of the rate"),
        pytest.param(
            600e6, 1, 0.4, 1_200_000_000,
            id="a server that reads the whole object before answering: pieces larger than it",
        ),
    ],
)  # fmt: skip
def test_a_piece_gets_a_stream_only_if_it_pays_back_the_wait_for_its_first_byte(
    rate: float, streams: int, first_byte_s: float, piece: int
) -> None:
    assert min_piece(rate, streams, first_byte_s, floor=16_000_000) == piece


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
