"""What reporting progress every step costs a training loop, measured side by side.

The same small training step (a 2-layer MLP forward/backward/SGD on CPU, or a fixed busy-wait
when torch is absent) runs without reporting and calling
``kubetrain.progress.report(step=..., total_steps=..., metrics={"loss": ...})`` every step.
The reporter is live: its sender thread POSTs to a real HTTPS server (in another process, on
loopback) that answers 200 at once, so the cost includes the sender thread's work.

Two estimates. The verdict adds what reporting costs the process per step: one ``report()``
call (a tight loop of them) plus the sender thread's CPU time (its own thread clock around each
update) spread over the steps, divided by the CPU time of a step. It holds on a busy machine.
The side-by-side run (rounds alternating A B A B ..., process CPU time, minimum of each side)
is printed too; it needs a quiet machine to resolve fractions of a percent.

    .venv/bin/python benchmarks/progress_overhead.py [--steps 300] [--rounds 30] [--interval 5]

Prints per-step times, the overhead ratio, and whether it is under 1 %.
"""

from __future__ import annotations

import argparse
import http.server
import json
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kubetrain.controller.pki import ensure_serving_cert
from kubetrain.progress.reporter import Reporter

__all__ = ["main"]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the aiohttp status server answers
    wbufsize = -1  # one write per answer (no Nagle stall between headers and body)
    received = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        json.loads(body)
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(folder: Path, ports: multiprocessing.Queue[int]) -> None:
    cert = ensure_serving_cert(folder, ["status.local"], ["127.0.0.1"])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    ports.put(httpd.server_address[1])
    httpd.serve_forever()


def _server(folder: Path) -> tuple[multiprocessing.Process, int, Path]:
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    proc = multiprocessing.Process(target=_serve, args=(folder, ports), daemon=True)
    proc.start()
    return proc, ports.get(timeout=30), folder / "ca.crt"


def _torch_step() -> Callable[[], float] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> float:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def _busy_step() -> float:
    end = time.perf_counter() + 0.0005
    while time.perf_counter() < end:
        pass
    return 0.5


class _TimedReporter(Reporter):
    """Adds up the sender thread's CPU time (building the body and posting it)."""

    sender_cpu = 0.0

    def _body(self, state: Any) -> dict[str, Any]:
        t0 = time.thread_time()
        try:
            return super()._body(state)
        finally:
            self.sender_cpu += time.thread_time() - t0

    def _post(self, body: dict[str, Any]) -> int:
        t0 = time.thread_time()
        try:
            return super()._post(body)
        finally:
            self.sender_cpu += time.thread_time() - t0


def _run(step: Callable[[], float], n: int, reporter: Reporter | None, offset: int = 0) -> float:
    t0 = time.process_time()
    for i in range(offset + 1, offset + n + 1):
        loss = step()
        if reporter is not None:
            reporter.report(step=i, total_steps=10**9, metrics={"loss": loss, "lr": 0.01})
    return (time.process_time() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per round")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--interval", type=float, default=5.0,
        help="reporter interval in seconds (5, as in pods, by default)",
    )  # fmt: skip
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        proc, port, ca = _server(Path(tmp))
        token = Path(tmp) / "token"
        token.write_text("benchmark-token")
        env = {
            "KUBEFLOW_TRAINER_SERVER_URL": f"https://127.0.0.1:{port}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/bench/status",
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token),
        }
        step = _torch_step()
        kind = "torch MLP step (1 thread)" if step else "0.5 ms busy-wait step (torch absent)"
        step = step or _busy_step
        _run(step, 200, None)  # warm up
        # One reporter for the whole run, as in a training job: its interval spans rounds.
        reporter = _TimedReporter(interval_s=args.interval, environ=env)
        plain: list[float] = []
        reported: list[float] = []
        for r in range(args.rounds):
            plain.append(_run(step, args.steps, None))
            reported.append(_run(step, args.steps, reporter, offset=r * args.steps))
        reporter.flush(5)
        # The bare cost of one call, in a tight loop (sender thread live).
        calls = 20_000
        t0 = time.process_time()
        for i in range(calls):
            reporter.report(step=i, total_steps=10**9, metrics={"loss": 0.5, "lr": 0.01})
        per_call = (time.process_time() - t0) / calls
        reporter.flush(5)
        proc.terminate()

    base, with_report = min(plain), min(reported)
    side_by_side = (with_report - base) / base
    sender_per_step = reporter.sender_cpu / (args.rounds * args.steps + calls)
    ratio = (per_call + sender_per_step) / base
    print(f"step: {kind}; {args.rounds} alternating rounds x {args.steps} steps (CPU time)")
    print(
        f"without reporting: {base * 1e6:9.1f} us/step (min; median {statistics.median(plain) * 1e6:.1f})"
    )
    print(
        f"report() per step: {with_report * 1e6:9.1f} us/step (min; median {statistics.median(reported) * 1e6:.1f})"
    )
    print(
        f"updates sent:      {reporter.sent} (interval {args.interval}s), failed {reporter.failed}"
    )
    print(f"one report() call: {per_call * 1e6:9.2f} us")
    print(f"sender thread:     {sender_per_step * 1e6:9.2f} us per step (CPU, amortised)")
    print(f"side by side:      {side_by_side * 100:+.2f} % (noisy unless the machine is quiet)")
    verdict = "under" if ratio < 0.01 else "OVER"
    print(f"overhead:          {ratio * 100:.2f} % of step time ({verdict} 1 %)")


if __name__ == "__main__":
    main()
