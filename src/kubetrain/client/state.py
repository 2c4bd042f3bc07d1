"""The one place the client asks :mod:`kubetrain.runtime` what state a TrainJob is in.

The rules (conditions first, then suspend, then running jobs) live in the runtime's state table;
the client only names the result.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_terminal", "job_state"]


def job_state(obj: dict[str, Any]) -> str:
    """The TrainJob's state name: Created, Suspended, Running, Complete or Failed."""
    from kubetrain.runtime.status import job_state as runtime_job_state

    return str(runtime_job_state(obj).value)


def is_terminal(state: str) -> bool:
    """Complete and Failed never change again."""
    from kubetrain.runtime.status import JobState

    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False
