"""How many ranged streams a large object gets: decided by measurement, not assumed. Pure.

A large object starts as one streaming GET. Every window the fetch measures the aggregate
rate (all bytes of the run over the window) and asks `Ramp.step` what to do. With no trial
under way the rate becomes the baseline and, where streams could be split, the ramp adds as
many ranged streams as there are splittable ones (a doubling). The next window judges that
trial against the baseline:

- the rate rose by ``min_gain`` or more: the streams stay and the next doubling is tried;
- it fell by ``max_loss`` or more: the new streams are taken back (their ranges go back to
  the streams they were cut from) and no more are tried in this run;
- in between: the new streams stay (their requests are paid for) and no more are tried.

Why by measurement: whether parallel ranges pay depends on the server and the path to it. On
S3 one stream is capped far below what a few ranges give; on a server that reads a whole
object for every ranged GET (moto), each range costs the whole object and one stream wins.
The trial window includes the new streams' time to first byte, so a server whose ranges are
expensive shows it in the measurement. `split_points` says where the new ranges start.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

__all__ = ["MAX_LOSS", "MIN_GAIN", "Ramp", "split_points"]

# A trial must raise the aggregate rate by this much to be followed by another: below it
# the gain is within the noise of a busy machine. One that lowers it by as much is undone.
MIN_GAIN = 0.15
MAX_LOSS = 0.15


@dataclass
class Ramp:
    min_gain: float = MIN_GAIN
    max_loss: float = MAX_LOSS
    baseline: float | None = None
    trial: int = 0  # streams added in the window now being judged
    settled: bool = False  # a trial did not pay: no more in this run

    def step(self, rate: float, active: int, possible: int) -> int:
        """The decision after a window of aggregate ``rate`` (bytes/s) with ``active``
        splittable streams, of which ``possible`` could be split now: ``n > 0`` adds n ranged
        streams, ``-n`` takes back the n of the trial, 0 leaves things as they are."""
        if self.trial:
            added, self.trial = self.trial, 0
            before = self.baseline or 0.0
            if rate < before * (1 + self.min_gain):
                self.settled = True
                self.baseline = rate
                return -added if rate <= before * (1 - self.max_loss) else 0
        self.baseline = rate
        if self.settled or active <= 0 or possible <= 0 or rate <= 0:
            return 0  # (a window without bytes measured nothing to compare with)
        self.trial = min(active, possible)
        return self.trial


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
