"""The in-pod progress reporter: percent, ETA, throttling, and a sender that never blocks training."""

from __future__ import annotations

import atexit
import json
import math
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["MAX_METRICS", "Reporter", "report"]

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"

# Upstream's CRD limits: at most 256 metrics, names and values 1..64 characters.
MAX_METRICS = 256
MAX_METRIC_TEXT = 64
DEFAULT_INTERVAL_S = 5.0  # the official SDK helper's throttle; the status server is rate limited too
SEND_TIMEOUT_S = 5.0


def _format_value(value: float | int | str) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}" if math.isfinite(value) else str(value)
    else:
        text = str(value)
    return text[:MAX_METRIC_TEXT]


def _is_reporting_rank() -> bool:
    # Every rank runs the same loop; only global rank 0 speaks, so the status shows one series.
    return os.environ.get("RANK", "0") == "0"


class Reporter:
    """Turns ``report()`` calls into status updates.

    The latest update waits in a one-slot mailbox that a daemon thread sends from, so a slow or
    unreachable server never stalls the training loop; the last update is flushed at exit.
    """

    def __init__(self, *, interval_s: float = DEFAULT_INTERVAL_S, clock: Any = time.monotonic) -> None:
        self._url = os.environ.get(ENV_URL, "")
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._first_step: tuple[float, int] | None = None
        self._last_sent_at = -math.inf
        self._pending: dict[str, Any] | None = None
        self._busy = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._token: tuple[float, str] | None = None
        self._ssl: ssl.SSLContext | None = None
        self.sent = 0
        self.failed = 0

    @property
    def enabled(self) -> bool:
        return bool(self._url) and _is_reporting_rank()

    def report(
        self,
        *,
        step: int | None = None,
        total_steps: int | None = None,
        percent: float | None = None,
        eta_seconds: float | None = None,
        metrics: Mapping[str, float | int | str] | None = None,
        force: bool = False,
    ) -> bool:
        """Queue an update; True when one was queued. Never raises."""
        try:
            return self._report(step, total_steps, percent, eta_seconds, metrics, force)
        except Exception:  # training must never die because progress could not be reported
            return False

    def _report(
        self,
        step: int | None,
        total_steps: int | None,
        percent: float | None,
        eta_seconds: float | None,
        metrics: Mapping[str, float | int | str] | None,
        force: bool,
    ) -> bool:
        if not self.enabled:
            return False
        now = self._clock()
        done = step is not None and total_steps is not None and step >= total_steps
        if not (force or done) and now - self._last_sent_at < self._interval_s:
            return False
        if percent is None and step is not None and total_steps:
            percent = 100.0 * step / total_steps
        if eta_seconds is None and step is not None and total_steps:
            eta_seconds = self._estimate_eta(now, step, total_steps)
        status: dict[str, Any] = {"lastUpdatedTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if percent is not None:
            status["progressPercentage"] = max(0, min(100, int(percent)))
        if eta_seconds is not None:
            status["estimatedRemainingSeconds"] = max(0, round(eta_seconds))
        if metrics:
            status["metrics"] = [
                {"name": str(name)[:MAX_METRIC_TEXT], "value": _format_value(value)}
                for name, value in list(metrics.items())[:MAX_METRICS]
            ]
        self._last_sent_at = now
        with self._cond:
            self._pending = {"trainerStatus": status}
            self._cond.notify()
        self._ensure_thread()
        return True

    def _estimate_eta(self, now: float, step: int, total_steps: int) -> float | None:
        if self._first_step is None:
            self._first_step = (now, step)
            return None
        t0, s0 = self._first_step
        if step <= s0:
            return None
        return (now - t0) / (step - s0) * (total_steps - step)

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kubetrain-progress", daemon=True)
            self._thread.start()
            atexit.register(self.flush)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                body, self._pending = self._pending, None
                self._busy = True
            self._send(body)
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def flush(self, timeout_s: float = SEND_TIMEOUT_S) -> None:
        """Wait until the queued update has been sent (called at interpreter exit)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (self._pending is not None or self._busy) and time.monotonic() < deadline:
                self._cond.wait(timeout=0.05)

    def _send(self, body: dict[str, Any]) -> None:
        try:
            request = urllib.request.Request(
                self._url,
                data=json.dumps(body).encode(),
                method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._read_token()}"},
            )
            with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S, context=self._context()) as resp:
                ok = resp.status == 200
        except (OSError, urllib.error.URLError, ValueError):
            ok = False
        if ok:
            self.sent += 1
        else:
            self.failed += 1
            if self.failed == 1:
                print("kubetrain.progress: status update failed; training continues", file=sys.stderr)

    def _read_token(self) -> str:
        # Projected tokens rotate; re-read at most every 5 minutes like the official helper.
        now = time.monotonic()
        if self._token is None or now - self._token[0] > 300:
            path = os.environ.get(ENV_TOKEN, "")
            token = ""
            if path:
                with open(path) as f:
                    token = f.read().strip()
            self._token = (now, token)
        return self._token[1]

    def _context(self) -> ssl.SSLContext | None:
        if not self._url.startswith("https:"):
            return None
        if self._ssl is None:
            ca = os.environ.get(ENV_CA, "")
            self._ssl = ssl.create_default_context(cafile=ca if ca and os.path.exists(ca) else None)
        return self._ssl


_default: Reporter | None = None


def report(
    *,
    step: int | None = None,
    total_steps: int | None = None,
    percent: float | None = None,
    eta_seconds: float | None = None,
    metrics: Mapping[str, float | int | str] | None = None,
    force: bool = False,
) -> bool:
    """Report progress of the current TrainJob; a no-op (False) outside one. Never raises.

    ``step``/``total_steps`` give the percentage and an ETA from the observed step rate.
    Updates are throttled to one per 5 s, except the final step and ``force=True``.
    """
    global _default
    if _default is None:
        _default = Reporter()
    return _default.report(
        step=step, total_steps=total_steps, percent=percent, eta_seconds=eta_seconds,
        metrics=metrics, force=force,
    )
