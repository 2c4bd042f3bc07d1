"""Benchmark of ``kubetrain dashboard``: 5,000 TrainJobs in the list, 100,000 metric points drawn.

A local daemon (own ``KUBETRAIN_HOME`` in a temporary folder) holds N suspended TrainJobs (so no
pod runs; the controller still reconciles each one), a quarter of them with a progress report in
their status, plus one TrainJob ``curves`` whose metric history holds P points (written through
``MetricsHistory.record``, as the status server writes them). ``kubetrain dashboard`` runs as its
own process; Debian's Chromium (Playwright) measures:

- list interactive: from navigation start to the table of every TrainJob drawn and live (the
  page's ``kt:list-ready`` mark, set once the first snapshot is on screen), cold then warm;
- dashboard RSS (``VmRSS``, and peak ``VmHWM``) after the list and the curves were served;
- curves: from navigation start to every chart drawn with all P points (``kt:charts-drawn``),
  and the drawing alone (the measure's duration), and the ``/metrics`` fetch.

Targets from issue 19: list interactive < 1 s and RSS < 200 MB with 5,000 TrainJobs; 100,000
points drawn < 500 ms.

    .venv/bin/python benchmarks/dashboard.py [--jobs 5000] [--points 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

TRAINER = "trainer.kubeflow.org/v1alpha1"
NAMESPACE = "bench"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _rss_mb(pid: int) -> tuple[float, float]:
    text = Path(f"/proc/{pid}/status").read_text()
    now = re.search(r"VmRSS:\s+(\d+) kB", text)
    peak = re.search(r"VmHWM:\s+(\d+) kB", text)
    return (int(now.group(1)) / 1024 if now else 0.0, int(peak.group(1)) / 1024 if peak else 0.0)


async def _populate(kubeconfig: Path, n: int) -> None:
    from kubetrain.controller.kube import connect

    kube = connect(kubeconfig)
    await kube.create(
        "v1",
        "namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    gate = asyncio.Semaphore(32)
    teams = ["nlp", "vision", "speech", "infra"]

    async def create(i: int) -> None:
        body = {
            "apiVersion": TRAINER,
            "kind": "TrainJob",
            "metadata": {
                "name": f"job-{i:05d}",
                "namespace": NAMESPACE,
                "labels": {"team": teams[i % len(teams)]},
            },
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 2},
                "suspend": True,
            },
        }
        async with gate:
            await kube.create(TRAINER, "trainjobs", body)
            if i % 4 == 0:
                status = {
                    "trainerStatus": {
                        "progressPercentage": i % 100,
                        "estimatedRemainingSeconds": 60 * (i % 50),
                        "metrics": [{"name": "loss", "value": f"{1 / (1 + i % 97):.4f}"}],
                        "lastUpdatedTime": "2026-01-01T00:00:00Z",
                    }
                }
                await kube.patch(
                    TRAINER, "trainjobs", f"job-{i:05d}", {"status": status},
                    namespace=NAMESPACE, subresource="status",
                )  # fmt: skip

    await asyncio.gather(*(create(i) for i in range(n)))
    curves = {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": "curves", "namespace": NAMESPACE},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True},
    }
    await kube.create(TRAINER, "trainjobs", curves)
    await kube.close()


def _history(home: Path, uid: str, points: int) -> None:
    from kubetrain.local.history import HISTORY_FILE, MetricsHistory

    history = MetricsHistory(home / HISTORY_FILE, max_points=points * 2)
    start = time.time() - points
    try:
        for i in range(points):
            report = {
                "progressPercentage": i * 100 // points,
                "metrics": [
                    {
                        "name": "loss",
                        "value": f"{2.5 / (1 + i / 500) + 0.01 * ((i * 7919) % 13):.5f}",
                    },
                    {"name": "lr", "value": f"{0.001 * (1 - i / points):.6f}"},
                ],
                "lastUpdatedTime": "2026-01-01T00:00:00Z",
            }
            history.record(NAMESPACE, "curves", uid, report, received=start + i)
    finally:
        history.close()


def _start_dashboard(home: Path) -> tuple[subprocess.Popen[str], str, float]:
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "dashboard"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    lines.get(timeout=60)
    url = lines.get(timeout=60).strip()
    return proc, url, time.monotonic() - started


def _measure(url: str, pid: int, n: int, points: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    base = url.split("/?", 1)[0]
    out: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url)  # trades the token for the session cookie
        # The server lists every job once at start; wait for that before timing the page.
        page.wait_for_selector(f"text={n + 1} TrainJobs", timeout=300_000)
        for label in ("list cold (first load)", "list warm"):
            # A fresh document each time (a hash change alone would keep the old one), and
            # about:blank first so no request of the previous page is still being served.
            page.goto("about:blank")
            page.goto(base + "/#/")
            page.wait_for_selector(f"text={n + 1} TrainJobs", timeout=60_000)
            out[label] = page.evaluate("performance.getEntriesByName('kt:list-ready')[0].startTime")
        # Typing in the name filter until the filtered table is painted, timed in the page.
        out["name filter to painted table"] = page.evaluate(
            """() => new Promise((done) => {
              const input = document.getElementById('f-name');
              const t0 = performance.now();
              input.value = 'job-0001';
              input.dispatchEvent(new Event('input'));
              requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
            })"""
        )
        page.wait_for_selector("text=10 of")
        out["dashboard RSS after list (MB)"], out["dashboard peak RSS after list (MB)"] = _rss_mb(
            pid
        )

        page.goto("about:blank")
        page.goto(base + f"/#/jobs/{NAMESPACE}/curves")
        try:
            page.wait_for_selector(f'#charts[data-points="{points}"]', timeout=120_000)
        except Exception:
            shown = page.evaluate(
                "[document.getElementById('charts')?.dataset.points,"
                " document.getElementById('banner').textContent]"
            )
            raise SystemExit(f"curves not drawn in 120 s; points shown, banner: {shown}") from None
        timing = page.evaluate(
            """() => {
              const m = performance.getEntriesByName('kt:charts-drawn')[0];
              const f = performance.getEntriesByType('resource').find((r) => r.name.includes('/metrics'));
              return {end: m.startTime + m.duration, draw: m.duration, fetch: f ? f.duration : null};
            }"""
        )
        out["curves drawn, from navigation (ms)"] = timing["end"]
        out["curves drawing alone (ms)"] = timing["draw"]
        out["metrics fetch (ms)"] = timing["fetch"]
        rss, peak = _rss_mb(pid)
        out["dashboard RSS after curves (MB)"] = rss
        out["dashboard peak RSS (MB)"] = peak
        browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args(argv)

    from kubetrain.client.connection import connect
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.resources import TRAINJOB
    from kubetrain.local.daemon import start_daemon, stop_daemon

    with tempfile.TemporaryDirectory(prefix="kt-dash-bench-") as tmp:
        home = Path(tmp) / "home"
        info = start_daemon(home)
        dashboard = None
        try:
            t0 = time.monotonic()
            asyncio.run(_populate(info.kubeconfig, args.jobs))
            print(f"created {args.jobs + 1} TrainJobs in {time.monotonic() - t0:.1f}s", flush=True)
            with JobClient(connect(home=home, namespace=NAMESPACE)) as jc:
                uid = jc.get(TRAINJOB, "curves")["metadata"]["uid"]
            t0 = time.monotonic()
            _history(home, uid, args.points)
            print(f"recorded {args.points} points in {time.monotonic() - t0:.1f}s", flush=True)
            dashboard, url, startup = _start_dashboard(home)
            print(f"dashboard printed its URL after {startup:.2f}s", flush=True)
            results = _measure(url, dashboard.pid, args.jobs, args.points)
        finally:
            if dashboard is not None:
                dashboard.terminate()
                dashboard.communicate(timeout=10)
            stop_daemon(home, kill_pods=True)
    targets = {
        "list cold (first load)": 1000.0,
        "list warm": 1000.0,
        "dashboard peak RSS after list (MB)": 200.0,
        "dashboard peak RSS (MB)": 200.0,
        "curves drawing alone (ms)": 500.0,
    }
    missed = 0
    for name, value in results.items():
        shown = f"{value:.0f}" if isinstance(value, int | float) else str(value)
        unit = "" if "(" in name else " ms"
        target = targets.get(name)
        verdict = (
            ""
            if target is None
            else f"  (target < {target:.0f}: {'ok' if value < target else 'MISSED'})"
        )
        missed += target is not None and not value < target
        print(f"{name:<40} {shown}{unit}{verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
