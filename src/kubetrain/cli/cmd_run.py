"""``kubetrain run -f job.yaml``: apply a TrainJob and stay with it until it ends.

Rank 0's output (step node-0, container ``node``) streams to stdout while a status line (state,
nodes, progress, elapsed) lives on stderr when that is a terminal, or state changes are printed
as lines when it is not. Exit 0 on Complete, 1 on Failed (with the reason). Ctrl-C suspends the
job rather than deleting it, so nothing is lost, and says how to resume or delete it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import obj_at

if TYPE_CHECKING:
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.steps import Step
    from kubetrain.client.view import JobView

__all__ = ["add_arguments", "run"]

POLL_SECONDS = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.legacy import add_convert_argument
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file(s) holding exactly one TrainJob (runtimes and other objects are applied too)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no log streaming, only the outcome"
    )
    add_convert_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _status_text(view: JobView, elapsed: float) -> str:
    from kubetrain.cli.present import metrics_text, progress_bar
    from kubetrain.client.present import eta

    started = sum(
        1 for s in view.steps if s.name.startswith("node-") and s.phase in ("Running", "Succeeded")
    )
    parts = [f"trainjob/{view.name}", view.state]
    if view.num_nodes:
        parts.append(f"{started}/{view.num_nodes} nodes")
    restarts = max((s.restarts for s in view.steps), default=0)
    if restarts:
        parts.append(f"{restarts} restarts")
    pct = view.progress.get("progressPercentage")
    if isinstance(pct, int):
        parts.append(f"{progress_bar(pct)} {pct}%")
    left = view.progress.get("estimatedRemainingSeconds")
    if left is not None:
        parts.append(f"ETA {eta(left)}")
    # The newest metrics the training code reported (status.trainerStatus), e.g. its loss.
    metrics = metrics_text(view.progress)
    if metrics:
        parts.append(metrics)
    parts.append(f"{elapsed:.0f}s")
    return "  ".join(parts)


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.legacy import convert_v1_objects
    from kubetrain.client import resources as R
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.files import read_objects
    from kubetrain.client.jobs import JobClient
    from kubetrain.client.state import is_terminal, job_state

    objs = read_objects(args.filename)
    conn = connect_from_args(args)
    # v1 jobs (PyTorchJob, TFJob, ...) run as their converted TrainJob; the report goes to stderr.
    try:
        objs = convert_v1_objects(
            objs, local=conn.local, allowed=args.convert, env_shim=args.env_shim
        )
    except BaseException:
        conn.close()
        raise
    jobs = [
        o
        for o in objs
        if o.get("apiVersion") == R.TRAINJOB.api_version and o.get("kind") == R.TRAINJOB.kind
    ]
    if len(jobs) != 1:
        raise ClientError(
            f"run needs exactly one TrainJob in its files, found {len(jobs)}; use apply for more"
        )
    with JobClient(conn) as jc:
        name = ""
        for obj in objs:
            result = jc.apply_one(obj)
            _note(str(result))
            if obj is jobs[0]:
                name = result.name
        wants_suspend = bool(obj_at(jobs[0], "spec").get("suspend"))
        live = jc.get(R.TRAINJOB, name)
        state = job_state(live)
        if is_terminal(state):
            # Finished jobs never run again (terminal states are sticky): say so up front.
            _note(
                f"trainjob {name} had already finished ({state}); showing that run. "
                f"To run it again: kubetrain delete {name}, then kubetrain run again."
            )
        elif obj_at(live, "spec").get("suspend") and not wants_suspend:
            # Left suspended by an earlier Ctrl-C: running it again means resuming it.
            jc.set_suspend(name, False)
            _note(f"{R.TRAINJOB.qualified}/{name} resumed")
        try:
            return _foreground(jc, name, quiet=args.quiet)
        except KeyboardInterrupt:
            jc.set_suspend(name, True)
            _wait_pods_gone(jc, name)
            _note(
                f"\ninterrupted: trainjob {name} is suspended (its pods are stopped, nothing deleted).\n"
                f"  resume it:  kubetrain resume {name}\n"
                f"  delete it:  kubetrain delete {name}"
            )
            return 130


def _wait_pods_gone(jc: JobClient, name: str, timeout: float = 10.0) -> None:
    """Give the engine a moment to stop the pods, so "stopped" below is true when printed."""
    import time

    deadline = time.monotonic() + timeout
    while jc.pods(name) and time.monotonic() < deadline:
        time.sleep(0.1)


def _note(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


def _foreground(jc: JobClient, name: str, *, quiet: bool) -> int:
    import sys
    import threading
    import time

    from kubetrain.client.logs import follow_step
    from kubetrain.client.state import is_terminal

    stop = threading.Event()
    log_done = threading.Event()

    def stream_logs() -> None:
        try:
            for line in follow_step(jc, name, "node-0", stop=stop):
                print(line, flush=True)
        except Exception as exc:  # a log stream failing must not kill the run; say so once
            _note(f"logs: {exc}")
        finally:
            log_done.set()

    logs = threading.Thread(target=stream_logs, name="run-logs", daemon=True)
    if not quiet:
        logs.start()
    else:
        log_done.set()
    start = time.monotonic()
    live = _status_display(sys.stderr, redirect_stdout=sys.stdout.isatty())
    last_state = ""
    last_report: object = None
    # A failed JobSet may delete its pods before the last poll: remember every failed exit seen.
    failures: dict[str, Step] = {}
    try:
        while True:
            view = jc.job(name)
            failures.update({s.name: s for s in view.steps if s.exit_code not in (None, 0)})
            text = _status_text(view, time.monotonic() - start)
            if live is not None:
                live.update(_styled(text, view.state))
            elif view.state != last_state or view.progress.get("lastUpdatedTime") != last_report:
                # Without a terminal: a line per state change and per progress report.
                _note(text)
            last_state = view.state
            last_report = view.progress.get("lastUpdatedTime")
            if is_terminal(view.state):
                break
            time.sleep(POLL_SECONDS)
        # Let the last lines of rank 0 arrive: the job can end a moment before its log closes.
        log_done.wait(timeout=5.0)
    finally:
        stop.set()
        if live is not None:
            live.stop()
    return _outcome(view, time.monotonic() - start, failures)


def _outcome(view: JobView, elapsed: float, failures: dict[str, Step]) -> int:
    if view.state == "Complete":
        _note(f"trainjob {view.name} Complete in {elapsed:.1f}s")
        return 0
    _note(f"trainjob {view.name} {view.state}: {view.message or 'no reason given'}")
    failed = list(
        ({**failures, **{s.name: s for s in view.steps if s.exit_code not in (None, 0)}}).values()
    )
    for s in failed:
        _note(
            f"  {s.name} (pod {s.pod}) exited {s.exit_code}{f' ({s.reason})' if s.reason else ''}"
        )
    if failed and any(s.pod == failed[0].pod for s in view.steps):  # only while the pod exists
        _note(f"  logs: kubetrain logs {view.name} --step {failed[0].name}")
    return 1


def _styled(text: str, state: str) -> Any:
    from rich.spinner import Spinner
    from rich.text import Text

    from kubetrain.cli.present import STATE_STYLES

    label = Text(text)
    label.highlight_words([state], style=STATE_STYLES.get(state, ""))
    return Spinner("dots", text=label)


def _status_display(stream: Any, *, redirect_stdout: bool) -> Any:
    """A rich Live status line on ``stream`` when it is a terminal, else None (plain lines)."""
    if not stream.isatty():
        return None
    from rich.console import Console
    from rich.live import Live

    live = Live(
        console=Console(file=stream),
        transient=True,
        refresh_per_second=8,
        redirect_stdout=redirect_stdout,
        redirect_stderr=False,
    )
    live.start()
    return live
