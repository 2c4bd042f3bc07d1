"""Reading one shard of a cache: upstream's client steps, with prefetching and retries.

``GetFlightInfo([shard, shards])`` on the head, then ``DoGet(ticket)`` on each endpoint's
worker in order: the shard's rows arrive in table order. A background thread keeps up to
``prefetch`` RecordBatches ahead of the consumer. When a call fails (a worker pod restarted
with its group, the head is reloading), the reader asks the head again and resumes after
the rows it already gave, until ``retry_timeout_s`` has passed without progress; a head that
now answers with another range or other columns for the shard (a different table) is an
error, never a silent switch.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("kubetrain.datacache")

__all__ = ["CacheReadError", "ShardReader", "default_endpoint", "shard_index"]


class CacheReadError(RuntimeError):
    """The shard could not be read completely; the message says where and why."""


def default_endpoint(env: Mapping[str, str] | None = None) -> str:
    """``grpc://<TRAIN_JOB_NAME>-cache-service:50051``, the Service the initializer made."""
    env = os.environ if env is None else env
    job = env.get("TRAIN_JOB_NAME")
    if not job:
        raise CacheReadError("TRAIN_JOB_NAME is not set: pass the cache endpoint explicitly")
    return f"grpc://{job}-cache-service:50051"


def shard_index(rank: int, world: int, worker: int, workers: int, rotation: int) -> tuple[int, int]:
    """(shard, shards) for a data-loader ``worker`` of a ``rank``, as upstream's notebook
    numbers them; ``rotation`` (seed + epoch) moves every rank to another shard each epoch."""
    shards = workers * world
    return (worker * world + rank + rotation) % shards, shards


@dataclass
class _Progress:
    rows: int = 0
    ticket: bytes | None = None
    schema: Any = None  # the columns of the first attempt


_DONE = object()


class ShardReader:
    """Iterate the RecordBatches of shard ``shard`` of ``shards`` from the head at
    ``endpoint``."""

    def __init__(
        self,
        endpoint: str,
        shard: int,
        shards: int,
        *,
        prefetch: int = 4,
        retry_timeout_s: float = 120.0,
    ) -> None:
        self.endpoint = endpoint
        self.shard, self.shards = shard, shards
        self.prefetch = max(1, prefetch)
        self.retry_timeout_s = retry_timeout_s

    def _stream(self, progress: _Progress) -> Iterator[Any]:
        """One attempt: the shard's batches after the first ``progress.rows`` rows."""
        import pyarrow.flight as flight

        head = flight.connect(self.endpoint)
        try:
            descriptor = flight.FlightDescriptor.for_path(str(self.shard), str(self.shards))
            info = head.get_flight_info(descriptor)
        finally:
            head.close()
        if progress.schema is None:
            progress.schema = info.schema
        elif not info.schema.equals(progress.schema):
            raise CacheReadError(
                f"{self.endpoint}: shard {self.shard}/{self.shards} changed its columns "
                "between attempts (the cache now serves another table)"
            )
        skip = progress.rows
        for endpoint in info.endpoints:
            ticket = endpoint.ticket.ticket
            if progress.ticket is None:
                progress.ticket = ticket
            elif ticket != progress.ticket:
                raise CacheReadError(
                    f"{self.endpoint}: shard {self.shard}/{self.shards} changed its rows "
                    "between attempts (the cache now serves another table)"
                )
            for location in endpoint.locations:
                worker = flight.connect(location)
                try:
                    for chunk in worker.do_get(endpoint.ticket):
                        batch = chunk.data
                        if skip >= batch.num_rows:
                            skip -= batch.num_rows
                            continue
                        if skip:
                            batch, skip = batch.slice(skip), 0
                        progress.rows += batch.num_rows
                        yield batch
                finally:
                    worker.close()
                # Upstream lists one location per endpoint; the rows are there once.
                break

    def __iter__(self) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.flight as flight

        out: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            progress = _Progress()
            last_progress, last_rows = time.monotonic(), 0
            last_error = ""
            while not stop.is_set():
                try:
                    for batch in self._stream(progress):
                        if not put(batch):
                            return
                    put(_DONE)
                    return
                except CacheReadError as err:
                    put(err)
                    return
                except (flight.FlightError, pa.ArrowException, OSError) as err:
                    if progress.rows != last_rows:
                        last_progress, last_rows = time.monotonic(), progress.rows
                    if time.monotonic() - last_progress > self.retry_timeout_s:
                        put(
                            CacheReadError(
                                f"{self.endpoint}: shard {self.shard}/{self.shards}: no progress "
                                f"for {self.retry_timeout_s:.0f} s after {progress.rows} row(s): "
                                f"{type(err).__name__}: {err}"
                            )
                        )
                        return
                    # One line per kind of failure, not per attempt (every 0.5 s).
                    if str(err) != last_error:
                        last_error = str(err)
                        log.warning(
                            "%s: shard %d/%d: reading failed after %d row(s) (%s: %s); retrying",
                            self.endpoint, self.shard, self.shards, progress.rows,
                            type(err).__name__, err,
                        )  # fmt: skip
                    time.sleep(0.5)
                except BaseException as err:  # handed to the consumer, which raises it
                    put(err)
                    return

        thread = threading.Thread(target=produce, name="datacache-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = out.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join()
