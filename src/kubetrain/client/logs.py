"""Log streams of a TrainJob's steps: one step, or every rank merged line by line.

A followed step may not have started yet (pods are created before their processes run), so
following waits for the step's pod to leave Pending; a step whose pod is replaced (a JobSet
restart) is followed into the new pod, which is what someone watching a job wants to see.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from kubetrain.client.errors import ClientError, NotFoundError
from kubetrain.client.jobs import JobClient
from kubetrain.client.state import is_terminal
from kubetrain.client.steps import Step

__all__ = ["LogLine", "follow_step", "merged", "step_name", "wait_for_step"]

LogLine = tuple[str, str]  # (step name, line)


def step_name(step: str = "node", rank: int | None = None) -> str:
    """``--step``/``--rank`` to a step name: node+rank N -> node-N, launcher -> node-0."""
    if step == "launcher":
        return "node-0"
    if step == "node":
        return f"node-{rank or 0}"
    if rank is not None and not step.startswith("node"):
        raise ClientError(f"--rank applies to --step node, not {step}")
    return step


def wait_for_step(
    jc: JobClient,
    job: str,
    step: str,
    *,
    stop: threading.Event | None = None,
    poll: float = 0.2,
    timeout: float | None = None,
) -> Step | None:
    """The step once its pod has started; None when the job ended (or ``stop``) without it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while stop is None or not stop.is_set():
        view = jc.job(job)
        found = next((s for s in view.steps if s.name == step), None)
        if found is not None and found.phase != "Pending":
            return found
        if is_terminal(view.state) or (deadline is not None and time.monotonic() > deadline):
            return None
        time.sleep(poll)
    return None


def follow_step(
    jc: JobClient,
    job: str,
    step: str,
    *,
    tail: int | None = None,
    stop: threading.Event | None = None,
    across_restarts: bool = True,
) -> Iterator[str]:
    """Every line of ``step`` until the job ends, without repeats.

    With ``across_restarts`` a pod that finishes is followed into its replacement (a JobSet
    restart) until the job itself ends; without it, following ends with the first pod's output,
    as ``kubectl logs -f`` does.
    """
    seen: dict[str, int] = {}  # pod -> lines already given, so a reconnect does not repeat
    while stop is None or not stop.is_set():
        current = wait_for_step(jc, job, step, stop=stop)
        if current is None:
            return
        skip = seen.get(current.pod, 0)
        count = 0
        first = current.pod not in seen
        seen.setdefault(current.pod, 0)
        try:
            for line in jc.logs(
                current.pod, current.container, follow=True, tail=tail if first else None
            ):
                count += 1
                if count > skip:
                    seen[current.pod] = count
                    yield line
                if stop is not None and stop.is_set():
                    return
        except NotFoundError:
            pass  # the pod went away mid-stream (restart or delete); look again
        view = jc.job(job)
        newest = next((s for s in view.steps if s.name == step), None)
        if is_terminal(view.state) and (newest is None or newest.pod in seen):
            return
        finished = newest is not None and newest.phase in ("Succeeded", "Failed")
        if not across_restarts and (newest is None or (newest.pod == current.pod and finished)):
            return
        if newest is not None and newest.pod == current.pod and finished:
            # This pod is done and nothing replaced it yet: wait for a replacement or the end.
            time.sleep(0.5)


def merged(streams: dict[str, Iterator[str]]) -> Iterator[LogLine]:
    """Lines from several streams as they arrive, tagged with their step name."""
    out: queue.Queue[LogLine | None] = queue.Queue()

    def pump(name: str, lines: Iterator[str]) -> None:
        try:
            for line in lines:
                out.put((name, line))
        except ClientError as exc:
            out.put((name, f"error: {exc}"))
        finally:
            out.put(None)

    threads = [
        threading.Thread(target=pump, args=(n, s), daemon=True, name=f"logs-{n}")
        for n, s in streams.items()
    ]
    for t in threads:
        t.start()
    open_streams = len(threads)
    while open_streams:
        item = out.get()
        if item is None:
            open_streams -= 1
        else:
            yield item
