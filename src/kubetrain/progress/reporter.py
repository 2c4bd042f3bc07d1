"""The in-pod progress reporter: percent, ETA, throttling, and a sender that never blocks training.

How a call travels: ``report()`` stores the latest state in a one-slot mailbox (a lock and an
assignment: microseconds) and returns. A daemon thread sends the newest state at most once per
interval, so a loop that reports every step causes one request per interval, and the state sent
last is always the newest one (a throttled call is delayed, never dropped). The final step and
``force=True`` skip the wait. At interpreter exit the last state is flushed.

Nothing here raises into the training loop: a missing server, a bad token or a refused value
costs one line on stderr, once.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import http.client
import json
import math
import os
import ssl
import sys
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_INTERVAL_S",
    "ENV_CA",
    "ENV_INTERVAL",
    "ENV_TOKEN",
    "ENV_URL",
    "MAX_METRICS",
    "MAX_METRIC_TEXT",
    "Reporter",
    "default_reporter",
    "flush",
    "format_metrics",
    "report",
]

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
# kubetrain's own knob: seconds between updates (short jobs and tests want less than 5 s).
ENV_INTERVAL = "KUBETRAIN_PROGRESS_INTERVAL"

# Upstream's CRD limits: at most 256 metrics, names and values 1..64 characters.
MAX_METRICS = 256
MAX_METRIC_TEXT = 64
DEFAULT_INTERVAL_S = 5.0  # the official SDK helper's throttle
MIN_INTERVAL_S = 0.25  # the status server refuses one TrainJob's updates closer than 0.2 s
SEND_TIMEOUT_S = 5.0
TOKEN_CACHE_S = 300.0  # projected tokens rotate; re-read like the official helper
ETA_WINDOW = 12  # ETA from the rate over the last dozen sent updates (about a minute)
# Ranks variables in the order launchers set them (torchrun, Open MPI, MPICH/Intel MPI).
_RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")

Value = Any  # float | int | str | bool, or a 0-d tensor / numpy scalar (read with .item())


def _plain(value: Value) -> Value:
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:  # a tensor of several elements: say what it is rather than fail
            return type(value).__name__
    return value


def _format_value(value: Value) -> str:
    value = _plain(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:.6g}" if math.isfinite(value) else str(value)
    else:
        text = str(value)
    return text[:MAX_METRIC_TEXT]


def format_metrics(metrics: Mapping[str, Value]) -> list[dict[str, str]]:
    """Metrics as the wire wants them: strings of 1..64 characters, at most 256, in given order.

    Entries the API server would refuse (empty name or value) are left out rather than making
    it refuse the whole update.
    """
    out: list[dict[str, str]] = []
    for name, value in metrics.items():
        text_name, text_value = str(name)[:MAX_METRIC_TEXT], _format_value(value)
        if text_name and text_value:
            out.append({"name": text_name, "value": text_value})
            if len(out) == MAX_METRICS:
                break
    return out


def _rank(environ: Mapping[str, str]) -> str:
    for name in _RANK_VARIABLES:
        if name in environ:
            return environ[name].strip()
    return "0"


def _interval(environ: Mapping[str, str]) -> float:
    try:
        return max(MIN_INTERVAL_S, float(environ[ENV_INTERVAL]))
    except (KeyError, ValueError):
        return DEFAULT_INTERVAL_S


class _State(NamedTuple):
    at: float  # clock() of the call
    step: int | None
    total_steps: int | None
    percent: float | None
    eta_seconds: float | None
    metrics: dict[str, Value] | None


class Reporter:
    """Turns ``report()`` calls into status updates for one TrainJob.

    Only global rank 0 speaks (every rank runs the same loop; the status shows one series).
    ``sender`` replaces the HTTP POST (tests, benchmarks); it returns the HTTP status code.
    """

    def __init__(
        self,
        *,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        sender: Callable[[dict[str, Any]], int] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self._url = env.get(ENV_URL, "")
        self._ca = env.get(ENV_CA, "")
        self._token_path = env.get(ENV_TOKEN, "")
        self._rank = _rank(env)
        self.interval_s = _interval(env) if interval_s is None else interval_s
        self._clock = clock
        self._sender = sender
        self._enabled = bool(self._url or sender) and self._rank == "0"
        self._token: tuple[float, str] | None = None
        self._ssl: ssl.SSLContext | None = None
        self._path = "/"
        self._first: tuple[float, int] | None = None
        self._samples: collections.deque[tuple[float, int]] = collections.deque(maxlen=ETA_WINDOW)
        self.sent = 0
        self.failed = 0
        self.last_body: dict[str, Any] | None = None
        self._reset_thread_state()
        # A forked child (DataLoader workers) inherits the lock's state but not the thread.
        os.register_at_fork(after_in_child=functools.partial(_reset_after_fork, weakref.ref(self)))

    def _reset_thread_state(self) -> None:
        self._cond = threading.Condition()
        # The newest state, and the one the sender last took: written without a lock (one
        # attribute store is atomic), never cleared, so no update can be lost in between.
        self._latest: _State | None = None
        self._taken: _State | None = None
        self._urgent = False
        self._busy = False
        self._next_due = -math.inf
        self._thread: threading.Thread | None = None
        # A child must not write into the parent's TLS connection.
        self._conn: http.client.HTTPConnection | None = None

    @property
    def enabled(self) -> bool:
        """True inside a TrainJob (the server URL is set) on the rank that reports."""
        return self._enabled

    def report(
        self,
        *,
        step: int | None = None,
        total_steps: int | None = None,
        percent: float | None = None,
        eta_seconds: float | None = None,
        metrics: Mapping[str, Value] | None = None,
        force: bool = False,
    ) -> bool:
        """Record the newest state; True when it will be sent. Never raises.

        The common path is a few attribute stores: no lock, no clock but one, no formatting
        (that happens in the sender thread).
        """
        if not self._enabled:
            return False
        try:
            now = self._clock()
            if self._first is None and step is not None:
                self._first = (now, step)
            # A copy: the caller may reuse its dict. Values are read (tensors too) when sent.
            self._latest = _State(
                now, step, total_steps, percent, eta_seconds, dict(metrics) if metrics else None
            )
            if force or (step is not None and total_steps is not None and step >= total_steps):
                self._urgent = True
                self._wake()
            elif now >= self._next_due:
                self._wake()
            if self._thread is None:
                self._start_thread()
            return True
        except Exception:  # training must never die because progress could not be reported
            return False

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubetrain-progress", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def _fresh(self) -> _State | None:
        latest = self._latest
        return latest if latest is not None and latest is not self._taken else None

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    state = self._fresh()
                    wait = self._next_due - self._clock()
                    if state is not None and (self._urgent or wait <= 0):
                        break
                    # Before the due time: sleep until then (a call in between is picked up
                    # then); after it with nothing new: until a call wakes us.
                    self._cond.wait(timeout=wait if wait > 0 else None)
                self._taken, self._urgent, self._busy = state, False, True
            retry = False
            try:
                body = self._body(state)
                code = self._post(body)
                retry = code == 429 or code >= 500 or code == 0
            except Exception:  # the thread must outlive any surprise
                code = 0
            with self._cond:
                self._busy = False
                # Paced by the interval; a transient refusal is retried sooner, unless newer
                # state has replaced it by then.
                pause = min(self.interval_s, 1.0) if retry else self.interval_s
                self._next_due = self._clock() + pause
                if retry and self._latest is state:
                    self._taken = None
                self._cond.notify_all()

    def _body(self, state: _State) -> dict[str, Any]:
        """The request body for ``state``: upstream's ``{"trainerStatus": {...}}``."""
        wall = time.time() - max(0.0, self._clock() - state.at)
        status: dict[str, Any] = {
            "lastUpdatedTime": datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        }
        percent, eta = state.percent, state.eta_seconds
        step, total = state.step, state.total_steps
        if percent is None and step is not None and total:
            percent = 100.0 * step / total
        if eta is None and step is not None and total:
            eta = self._estimate_eta(state.at, step, total)
        if percent is not None and math.isfinite(percent):
            status["progressPercentage"] = max(0, min(100, int(percent)))
        if eta is not None and math.isfinite(eta):
            status["estimatedRemainingSeconds"] = max(0, min(2**31 - 1, round(eta)))
        if state.metrics:
            formatted = format_metrics(state.metrics)
            if formatted:
                status["metrics"] = formatted
        return {"trainerStatus": status}

    def _estimate_eta(self, now: float, step: int, total_steps: int) -> float | None:
        if step >= total_steps:
            return 0.0
        # The rate over recent updates follows a changing pace (warm-up, evaluation phases);
        # the first observed step anchors it until there are samples.
        self._samples.append((now, step))
        t0, s0 = self._samples[0]
        if step <= s0 and self._first is not None:
            t0, s0 = self._first
        if step <= s0 or now <= t0:
            return None
        return (now - t0) / (step - s0) * (total_steps - step)

    def flush(self, timeout_s: float = SEND_TIMEOUT_S) -> bool:
        """Send the newest state now and wait until it is sent; True when nothing is left."""
        if self._thread is None:
            return self._fresh() is None
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if self._fresh() is not None:
                self._urgent = True
                self._cond.notify_all()
            while (self._fresh() is not None or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=0.05)
            return self._fresh() is None and not self._busy

    def _post(self, body: dict[str, Any]) -> int:
        self.last_body = body
        code = self._sender(body) if self._sender is not None else self._http_post(body)
        if code == 200:
            self.sent += 1
        else:
            self.failed += 1
            if self.failed == 1:
                print(
                    f"kubetrain.progress: status update refused ({code or 'unreachable'});"
                    " training continues",
                    file=sys.stderr,
                )
        return code

    def _http_post(self, body: dict[str, Any]) -> int:
        data = json.dumps(body).encode()
        try:
            headers = {
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self._read_token()}",
            }
        except OSError:  # no token file: nothing the server could accept
            return 0
        # One kept-alive connection: a TLS handshake per update would cost the loop's core
        # more than the update itself. A dropped connection is reopened once.
        for attempt in (1, 2):
            try:
                conn = self._connection()
                conn.request("POST", self._path, body=data, headers=headers)
                with conn.getresponse() as resp:
                    resp.read()
                    return int(resp.status)
            except Exception:  # unreachable, TLS failure, closed by the server
                self._close_connection()
                if attempt == 2:
                    return 0
        return 0

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            url = urllib.parse.urlsplit(self._url)
            self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            host, port = url.hostname or "", url.port
            if url.scheme == "https":
                self._conn = http.client.HTTPSConnection(
                    host, port, timeout=SEND_TIMEOUT_S, context=self._context()
                )
            else:
                self._conn = http.client.HTTPConnection(host, port, timeout=SEND_TIMEOUT_S)
        return self._conn

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _read_token(self) -> str:
        now = time.monotonic()
        if self._token is None or now - self._token[0] > TOKEN_CACHE_S:
            token = ""
            if self._token_path:
                with open(self._token_path) as f:
                    token = f.read().strip()
            self._token = (now, token)
        return self._token[1]

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            cafile = self._ca if self._ca and os.path.exists(self._ca) else None
            self._ssl = ssl.create_default_context(cafile=cafile)
        return self._ssl


def _reset_after_fork(ref: weakref.ReferenceType[Reporter]) -> None:
    reporter = ref()
    if reporter is not None:
        reporter._reset_thread_state()


_default: Reporter | None = None
_default_lock = threading.Lock()


def default_reporter() -> Reporter:
    """The process-wide reporter that `report` uses (created on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Reporter()
    return _default


def report(
    *,
    step: int | None = None,
    total_steps: int | None = None,
    percent: float | None = None,
    eta_seconds: float | None = None,
    metrics: Mapping[str, Value] | None = None,
    force: bool = False,
) -> bool:
    """Report progress of the current TrainJob; a no-op (False) outside one. Never raises.

    ``step``/``total_steps`` give the percentage and an ETA from the recent step rate;
    ``percent``/``eta_seconds`` set them directly. ``metrics`` values may be numbers, strings
    or 0-d tensors. Updates go out at most once per 5 s (``KUBETRAIN_PROGRESS_INTERVAL``
    changes that), always with the newest values; the final step and ``force=True`` go at once.
    """
    try:
        reporter = default_reporter()
    except Exception:
        return False
    return reporter.report(
        step=step,
        total_steps=total_steps,
        percent=percent,
        eta_seconds=eta_seconds,
        metrics=metrics,
        force=force,
    )


def flush(timeout_s: float = SEND_TIMEOUT_S) -> bool:
    """Send the newest reported state now and wait for it (also done at interpreter exit)."""
    try:
        return _default.flush(timeout_s) if _default is not None else True
    except Exception:
        return False
