"""Reconcile counters and durations, kept in memory and rendered in Prometheus text format.

The numbers issue 7 asks for (reconcile counts, durations, errors, queue depth) are collected here
from the first version on; serving them on ``/metrics`` is a thin HTTP layer on top.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

__all__ = ["ControllerMetrics"]


@dataclass
class ControllerMetrics:
    reconciles: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    """(kind, outcome) → count; outcome is success, requeue_after or error."""
    seconds_sum: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    seconds_count: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def observe(self, kind: str, outcome: str, seconds: float) -> None:
        self.reconciles[(kind, outcome)] += 1
        self.seconds_sum[kind] += seconds
        self.seconds_count[kind] += 1

    def total(self, kind: str | None = None, outcome: str | None = None) -> int:
        return sum(
            n
            for (k, o), n in self.reconciles.items()
            if (kind is None or k == kind) and (outcome is None or o == outcome)
        )

    def prometheus(self, *, queue_depth: int = 0) -> str:
        """The metrics in Prometheus' text exposition format."""
        lines = [
            "# HELP kubetrain_reconcile_total Reconciles by kind and outcome.",
            "# TYPE kubetrain_reconcile_total counter",
        ]
        for (kind, outcome), n in sorted(self.reconciles.items()):
            lines.append(f'kubetrain_reconcile_total{{kind="{kind}",outcome="{outcome}"}} {n}')
        lines += [
            "# HELP kubetrain_reconcile_seconds Time spent reconciling, by kind.",
            "# TYPE kubetrain_reconcile_seconds summary",
        ]
        for kind in sorted(self.seconds_count):
            lines.append(
                f'kubetrain_reconcile_seconds_sum{{kind="{kind}"}} {self.seconds_sum[kind]:.6f}'
            )
            lines.append(
                f'kubetrain_reconcile_seconds_count{{kind="{kind}"}} {self.seconds_count[kind]}'
            )
        lines += [
            "# HELP kubetrain_workqueue_depth Keys waiting in the work queue.",
            "# TYPE kubetrain_workqueue_depth gauge",
            f"kubetrain_workqueue_depth {queue_depth}",
        ]
        return "\n".join(lines) + "\n"
