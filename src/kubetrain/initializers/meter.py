"""Bytes fetched so far, the rate and the ETA: logged, and reported through kubetrain.progress
(a no-op where the pod has no TrainJobStatus endpoint)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubetrain import progress

__all__ = ["Meter", "human"]

log = logging.getLogger("kubetrain.initializers")


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


class Meter:
    """Counts bytes from many threads; a timer thread logs and reports every ``interval_s``."""

    def __init__(
        self, total: int, *, interval_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._clock = clock
        self._start = clock()
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n

    def __enter__(self) -> Meter:
        self._thread = threading.Thread(target=self._loop, name="initializer-meter", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.done or not self.total:  # nothing came (all cached): no "0 of N" line
            self.emit(final=True)

    def rate(self) -> float:
        elapsed = max(self._clock() - self._start, 1e-6)
        return self.done / elapsed

    def emit(self, *, final: bool = False) -> None:
        done, total, rate = self.done, self.total, self.rate()
        eta = (total - done) / rate if rate > 0 and total > done else 0.0
        percent = 100.0 * done / total if total else 100.0
        log.info(
            "fetched %s of %s (%.0f%%, %s/s, ETA %.0f s)",
            human(done), human(total), percent, human(rate), eta,
        )  # fmt: skip
        progress.report(
            percent=percent,
            eta_seconds=eta,
            metrics={"bytes_done": done, "bytes_total": total, "bytes_per_s": round(rate)},
            force=final,
        )

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.emit()
