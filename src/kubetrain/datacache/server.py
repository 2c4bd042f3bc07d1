"""The cache's head and worker: Arrow Flight services speaking upstream's protocol.

The head plans the table's data files, spreads them over the workers (`group_files`) and
sends each worker its group with ``DoPut``: one RecordBatch of upstream's columns
``worker_ids``, ``row_start_indexes``, ``row_end_indexes`` (UInt64) and ``file_paths``
(List<Utf8View>). It then answers ``GetFlightInfo`` for a path descriptor ``[rank, world]``
with one endpoint per worker whose rows meet the rank's range, each holding that range as
its ticket. A worker loads its files into memory once and answers ``DoGet(ticket)`` with the
rows of the range it holds, streamed as zero-copy slices of what it loaded.

Each serves ``GET /ready`` on ``HEALTH_PORT`` (8080): 200 once its part is loaded, else 503.
"""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from .protocol import FileGroup, IndexPair, ProtocolError, decode_pair, encode_pair, group_files
from .protocol import partition_range as _partition_range
from .table import CacheSource, TableError, file_rows, load_table, read_files

__all__ = ["GROUP_SCHEMA", "HeadServer", "WorkerServer", "serve_health"]

log = logging.getLogger("kubetrain.datacache")

GROUP_SCHEMA = pa.schema(
    [
        pa.field("worker_ids", pa.uint64(), nullable=False),
        pa.field("row_start_indexes", pa.uint64(), nullable=False),
        pa.field("row_end_indexes", pa.uint64(), nullable=False),
        pa.field("file_paths", pa.list_(pa.field("item", pa.string_view())), nullable=False),
    ]
)
# Rows per streamed batch at most: big enough to amortise per-message costs, small enough
# that a client's prefetch queue holds a few without much memory.
_BATCH_ROWS = 64 * 1024


def serve_health(port: int, ready: Callable[[], bool]) -> http.server.ThreadingHTTPServer:
    """``GET /ready`` on ``0.0.0.0:port`` in a daemon thread, as upstream's probe expects."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/ready":
                self.send_error(404)
                return
            ok = ready()
            body = b"ready" if ok else b"not ready"
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


class WorkerServer(flight.FlightServerBase):  # type: ignore[misc]  # pyarrow has no stubs
    """One worker: ``DoPut`` of its file group loads it; ``DoGet`` streams ranges of it."""

    def __init__(self, location: str, source: CacheSource, **kwargs: Any) -> None:
        super().__init__(location, **kwargs)
        self._source = source
        self._lock = threading.Lock()
        self._rows: pa.Table | None = None
        self._start = 0

    def ready(self) -> bool:
        return self._rows is not None

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        group = reader.read_all()
        for name in ("file_paths", "row_start_indexes"):
            if name not in group.column_names or group.num_rows == 0:
                raise pa.ArrowInvalid(f"DoPut: {name} column not found")
        paths = [str(p) for p in group.column("file_paths")[0].as_py() or []]
        start = int(group.column("row_start_indexes")[0].as_py())
        log.info("loading %d data file(s) of %s from row %d", len(paths), self._source.name, start)
        began = time.monotonic()
        try:
            rows = read_files(load_table(self._source), paths)
        except TableError as err:
            raise flight.FlightServerError(str(err)) from err
        with self._lock:
            self._rows, self._start = rows, start
        log.info(
            "loaded rows %d-%d (%.1f MB) in %.1f s",
            start, start + rows.num_rows - 1, rows.nbytes / 1e6, time.monotonic() - began,
        )  # fmt: skip

    def do_get(self, context: Any, ticket: Any) -> Any:
        try:
            pair = decode_pair(ticket.ticket)
        except ProtocolError as err:
            raise pa.ArrowInvalid(f"Invalid ticket format: {err}") from err
        with self._lock:
            rows, start = self._rows, self._start
        if rows is None:
            raise flight.FlightUnavailableError("this cache worker has not loaded its rows yet")
        first = max(pair.start, start)
        last = min(pair.end, start + rows.num_rows - 1)
        part = rows.slice(first - start, max(0, last - first + 1))
        batches = part.to_batches(max_chunksize=_BATCH_ROWS)
        return flight.RecordBatchStream(pa.Table.from_batches(batches, schema=rows.schema))


def _send_group(uri: str, group: FileGroup, deadline: float) -> None:
    batch = pa.record_batch(
        [
            pa.array([group.worker], pa.uint64()),
            pa.array([group.start], pa.uint64()),
            pa.array([group.end], pa.uint64()),
            pa.array([list(group.paths)], GROUP_SCHEMA.field("file_paths").type),
        ],
        schema=GROUP_SCHEMA,
    )
    while True:
        try:
            client = flight.connect(uri)
            try:
                writer, _ = client.do_put(flight.FlightDescriptor.for_command(b""), GROUP_SCHEMA)
                writer.write_batch(batch)
                writer.close()
            finally:
                client.close()
            return
        except flight.FlightUnavailableError as err:
            # The worker's pod is not up yet (or its name does not resolve yet).
            if time.monotonic() > deadline:
                raise TableError(f"cache worker {uri} did not answer: {err}") from err
            time.sleep(0.5)


class HeadServer(flight.FlightServerBase):  # type: ignore[misc]  # pyarrow has no stubs
    """The head: spreads the table over ``workers`` (``grpc://host:port``), then tells each
    rank which workers hold its rows."""

    def __init__(
        self, location: str, source: CacheSource, workers: Sequence[str], **kwargs: Any
    ) -> None:
        super().__init__(location, **kwargs)
        self._source = source
        self._workers = list(workers)
        self._groups: list[FileGroup] | None = None
        self._schema: pa.Schema | None = None

    def ready(self) -> bool:
        return self._groups is not None

    def load(self, connect_timeout_s: float) -> None:
        """Plan the table and load every worker; `TableError` when that cannot happen."""
        table = load_table(self._source)
        files = file_rows(table)
        groups = group_files(files, len(self._workers))
        total = sum(g.rows for g in groups)
        log.info(
            "table %s: %d row(s) in %d data file(s) over %d worker(s)",
            self._source.name, total, len(files), len(self._workers),
        )  # fmt: skip
        deadline = time.monotonic() + connect_timeout_s
        errors: list[BaseException] = []

        def send(group: FileGroup) -> None:
            try:
                _send_group(self._workers[group.worker], group, deadline)
            except Exception as err:
                errors.append(err)

        threads = [threading.Thread(target=send, args=(g,)) for g in groups]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise TableError(f"loading the cache workers failed: {errors[0]}")
        self._schema = table.scan().projection().as_arrow()
        self._groups = groups

    def watch(self, every_s: float = 2.0) -> threading.Thread:
        """Keep the workers loaded, in a daemon thread: a worker that restarted alone (its
        group's restart policy ``None``, or a container restart in place) comes back empty, and
        gets its group again. The probe is a one-row ``DoGet``; a worker that is down is left
        until it answers."""

        def loop() -> None:
            while True:
                time.sleep(every_s)
                for group in self._groups or ():
                    if group.rows and not self._serves(group):
                        try:
                            _send_group(self._workers[group.worker], group, time.monotonic())
                            log.info("worker %s had lost its rows: loaded it again",
                                     self._workers[group.worker])  # fmt: skip
                        except Exception as err:  # down, or loading failed: the next round
                            log.debug("worker %s: %s", self._workers[group.worker], err)

        thread = threading.Thread(target=loop, name="watch-workers", daemon=True)
        thread.start()
        return thread

    def _serves(self, group: FileGroup) -> bool:
        try:
            client = flight.connect(self._workers[group.worker])
            try:
                ticket = flight.Ticket(encode_pair(IndexPair(group.start, group.start)))
                return bool(client.do_get(ticket).read_all().num_rows == 1)
            finally:
                client.close()
        except (flight.FlightError, pa.ArrowException, OSError):
            return False

    def get_flight_info(self, context: Any, descriptor: Any) -> Any:
        path = list(descriptor.path or [])
        if len(path) < 2:
            raise pa.ArrowInvalid(f"Missing {'local_rank' if not path else 'total'} in path")
        try:
            world = int(path[1])
        except ValueError:
            raise pa.ArrowInvalid("Invalid total value") from None
        try:
            rank = int(path[0])
        except ValueError:
            raise pa.ArrowInvalid("Invalid local_rank value") from None
        groups, schema = self._groups, self._schema
        if groups is None or schema is None:
            raise flight.FlightUnavailableError("the cache is still loading the table")
        pair = _partition_range(sum(g.rows for g in groups), world, rank)
        if pair is None:
            raise flight.FlightServerError("Invalid partition range")
        ticket = encode_pair(pair)
        endpoints = [
            flight.FlightEndpoint(ticket, [self._workers[g.worker]], app_metadata=ticket)
            for g in groups
            if g.start <= pair.end and g.end >= pair.start
        ]
        return flight.FlightInfo(schema, descriptor, endpoints, -1, -1)
