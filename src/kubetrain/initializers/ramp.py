"""How many ranged streams a large object gets: decided by measurement, not assumed. Pure.

A large object starts as one streaming GET. The fetch measures the aggregate rate (all bytes
of the run) over windows (`Ramp.measure`: the first from the first bytes on, a trial's from
its new streams' first bytes on) and asks `Ramp.step` what to do after each. With no trial
under way the rate becomes the baseline and, where streams could be split, the ramp adds
ranged streams: the first trial up to `FIRST_STREAMS` in all, each later one as many as there
are splittable streams (a doubling). The next window judges that
trial against the baseline; one that is not a clear gain is measured once more, and the
better of its two windows decides (on a busy machine a window in which every stream stalled
is common):

- each new stream brought ``earn`` (half) of what a stream got before the trial or more,
  and the rate rose by ``min_gain`` at least (1 -> 4 streams: 2.5x; 4 -> 8: 1.5x), a
  clear gain: the streams stay and the next doubling is tried;
- it fell by ``max_loss`` or more, or a new stream still had no first byte after
  ``max_wait`` windows: the new streams are taken back (their ranges go back to the streams
  they were cut from) and no more are tried in this run;
- in between, a marginal gain among them (1 -> 4 streams at 1.4x: each new stream
  brought an eighth of one's worth): the new streams stay (their requests are paid for) and
  no more are tried. A server that gave four streams little more than one will not give
  eight more, and each stream beyond what it can feed only adds CPU, on a machine it may
  share with the client (s3rver, one Node.js process: one stream 1x, 4 fixed ranges 1.37x,
  8 streams no faster than 4); a trial of 8 there that was slower had to be taken back,
  and its streams' bytes fetched again. Where one stream is capped (S3), a new one brings
  nearly a whole stream's worth, and the doublings go on.

Why by measurement: whether parallel ranges pay depends on the server and the path to it. On
S3 one stream is capped far below what a few ranges give; on a server that reads a whole
object before answering a GET (moto), each range costs the whole object and one stream wins.

What a range costs is measured apart from what it gains: a piece is cut only where fetching
it takes `PAYBACK` times the wait for a first byte (`min_piece`), the first GET's measured
before any cut and each trial's streams' after it. Where the server reads the whole object
before answering, that wait is a large part of the whole transfer, so nothing is cut; where
it answers in milliseconds, cuts come after the first window. `split_points` says where the
new ranges start.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = [
    "EARN", "FIRST_STREAMS", "MAX_LOSS", "MAX_WAIT", "MIN_GAIN", "PAYBACK", "WINDOW_S", "Ramp", "min_piece", "split_points",
]  # fmt: skip

# A trial must raise the aggregate rate by this much to be followed by another: below it
# the gain is within the noise of a busy machine. One that lowers it by as much is undone.
MIN_GAIN = 0.15
# And each of its new streams must have brought this share of what a stream got before it:
# below it the server is near what it can give, and more streams only add CPU (s3rver: 4
# streams gave 1-2x one in 0.2 s windows, 8 no more than 4).
EARN = 0.5
MAX_LOSS = 0.15
# How long a measurement lasts: long enough for tens of MB at the rates where ranges matter,
# short beside the seconds a large object takes (a 1 GB object at 400 MB/s: 2.5 s).
WINDOW_S = 0.2
# The streams the first trial brings a run to: where ranges pay at all, a few pay at once
# (against s3rver, 4 fixed ranges of a 1 GB object gave 1.4x one stream), and a trial that
# does not pay is taken back like any other.
FIRST_STREAMS = 4
# How many windows a trial's window waits for its new streams' first bytes (s3rver: 10-30
# ms; moto, which reads the whole object first: 0.4-0.9 s for a range of a 256 MB object).
MAX_WAIT = 4
# A piece gets a stream of its own only if fetching it takes this many times the wait for a
# first byte (the longest among the streams started last): then the wait costs at most a
# fifth of the piece's time.
PAYBACK = 5


@dataclass
class Ramp:
    min_gain: float = MIN_GAIN
    earn: float = EARN
    max_loss: float = MAX_LOSS
    window_s: float = WINDOW_S
    max_wait: float = MAX_WAIT  # in windows
    baseline: float | None = None
    start: tuple[float, int] | None = None  # the window's: time, bytes done
    asked: float = 0.0  # when the last window ended (and a trial may have begun)
    trial: int = 0  # streams added in the window now being judged
    first: float | None = None  # the trial's first window's rate, when that did not decide
    settled: bool = False  # a trial did not pay: no more in this run
    opened: int | None = None  # the streams before the first trial (None: none tried yet)
    streams: int = 0  # the splittable streams before the trial now being judged

    def measure(self, now: float, done: int, waiting: int) -> float | None:
        """The aggregate rate when a window is over at ``now`` (seconds), ``done`` bytes
        fetched in all, ``waiting`` of the trial's streams still without a first byte; None
        while it goes on. The first window begins at the first bytes, a trial's when its
        streams have all begun (what a stream costs before that is `min_piece`'s measure), or
        it ends ``max_wait`` windows after the trial began, its streams still waiting."""
        held = self.trial and waiting > 0  # a trial whose streams have not all begun
        if held and now - self.asked >= self.max_wait * self.window_s:
            self.start, self.asked = (now, done), now
            return 0.0  # what it measures is that they did not begin
        if held or self.start is None:
            self.start = (now, done) if done and not held else None
            return None
        began, before = self.start
        if now - began < self.window_s:
            return None
        self.start, self.asked = (now, done), now
        return (done - before) / (now - began)

    def step(self, rate: float, active: int, possible: int, waiting: int = 0) -> int:
        """The decision after a window of aggregate ``rate`` (bytes/s) with ``active``
        splittable streams, of which ``possible`` could be split now, and ``waiting`` of the
        trial's streams without a first byte: ``n > 0`` adds n ranged streams, ``-n`` takes
        back the n of the trial, 0 leaves things as they are (or waits for a trial's second
        window)."""
        if self.trial:
            before = self.baseline or 0.0
            clear = before * self.clear_gain(self.streams, self.streams + self.trial)
            if waiting <= 0 and rate < clear and self.first is None:
                # Not a clear gain: one more window. On a busy machine a window in which
                # every stream stalled is common, and does not decide a trial alone.
                self.first = rate
                return 0
            rate = max(rate, self.first or 0.0)
            added, self.trial, self.first = self.trial, 0, None
            if waiting > 0 or rate < clear:
                self.settled = True
                self.baseline = rate
                slower = waiting > 0 or rate <= before * (1 - self.max_loss)
                return -added if slower else 0
        self.baseline = rate
        if self.settled or active <= 0 or possible <= 0 or rate <= 0:
            return 0  # (a window without bytes measured nothing to compare with)
        # The first trial goes straight to FIRST_STREAMS: an object that takes a few seconds
        # has no time for 1 -> 2 -> 4, each step judged on its own windows.
        wanted = max(active, FIRST_STREAMS - active) if self.opened is None else active
        self.opened = self.opened or active
        self.streams, self.trial = active, min(wanted, possible)
        return self.trial

    def clear_gain(self, before: int, after: int) -> float:
        """The factor by which a trial from ``before`` to ``after`` streams must raise the
        rate to be followed by another: each new stream ``earn`` of what one got before it,
        and ``1 + min_gain`` at least."""
        added = (after - before) / before if before > 0 else 1.0
        return max(1 + self.min_gain, 1 + self.earn * added)


def min_piece(rate: float, streams: int, first_byte_s: float, floor: int) -> int:
    """The smallest piece worth a stream of its own, in bytes: at the rate each of
    ``streams`` streams gets out of the aggregate ``rate``, one that takes `PAYBACK` times
    ``first_byte_s`` (a wait for a first byte measured) to fetch, ``floor`` at least."""
    per_stream = rate / max(streams, 1)
    return max(floor, int(PAYBACK * first_byte_s * per_stream))


def split_points(spans: list[tuple[int, int, int]], n: int, min_part: int) -> list[tuple[int, int]]:
    """Up to ``n`` cuts of the spans still to fetch, ``(object, position, end)``: each cut
    halves the largest piece left whose halves are both at least ``min_part`` bytes. Returns
    ``(object, offset of the cut)`` in the order made; a piece made by one cut can be cut by
    a later one."""
    heap = [(-(end - pos), key, pos) for key, pos, end in spans]
    heapq.heapify(heap)
    cuts: list[tuple[int, int]] = []
    while heap and len(cuts) < n:
        neg, key, pos = heapq.heappop(heap)
        left = -neg
        if left < 2 * min_part:
            break
        half = left // 2
        cuts.append((key, pos + half))
        heapq.heappush(heap, (-half, key, pos))
        heapq.heappush(heap, (-(left - half), key, pos + half))
    return cuts
