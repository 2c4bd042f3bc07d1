"""The one place the client asks :mod:`kubetrain.runtime` what state a TrainJob is in."""

from __future__ import annotations

from typing import Any

from kubetrain.client.steps import Step

__all__ = ["TERMINAL_STATES", "is_terminal", "job_state"]

TERMINAL_STATES = frozenset({"Complete", "Failed"})


def job_state(obj: dict[str, Any], steps: list[Step], num_nodes: int | None) -> str:
    """The TrainJob's state name.

    TODO(H2: kubetrain.runtime JobState not landed yet): call the runtime's mapping here; until
    then only the conditions upstream defines are read, in their documented precedence.
    """
    conds = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    for kind in ("Failed", "Complete"):
        if (conds.get(kind) or {}).get("status") == "True":
            return kind
    if (conds.get("Suspended") or {}).get("status") == "True" or (obj.get("spec") or {}).get(
        "suspend"
    ):
        return "Suspended"
    nodes = [s for s in steps if s.name.startswith("node-")]
    if nodes and any(s.phase == "Running" for s in nodes):
        return "Running"
    return "Created"


def is_terminal(state: str) -> bool:
    return state in TERMINAL_STATES
