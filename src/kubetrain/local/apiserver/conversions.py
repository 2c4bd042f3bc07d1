"""Served views of stored kinds: ``events.k8s.io/v1`` Events are core/v1 Events, renamed.

Kubernetes stores one Event and serves it in both shapes, so an event written by an
``events.k8s.io`` recorder shows up for clients that list core/v1 events (the Kubeflow SDK),
and the other way round. Converters map only the fields present, so partial (apply)
documents convert too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["VIEWS", "View"]

# (events.k8s.io/v1 field, core/v1 field); fields with the same name in both are copied as is.
_EVENT_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_EVENT_SAME = (
    "metadata",
    "reason",
    "type",
    "action",
    "related",
    "eventTime",
    "series",
    "reportingInstance",
)


def _event_to_core(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    for key in _EVENT_SAME:
        if key in obj:
            out[key] = obj[key]
    for view_key, core_key in _EVENT_RENAMES:
        if view_key in obj:
            out[core_key] = obj[view_key]
    return out


def _event_from_core(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key in _EVENT_SAME:
        if key in obj:
            out[key] = obj[key]
    for view_key, core_key in _EVENT_RENAMES:
        if core_key in obj:
            out[view_key] = obj[core_key]
    return out


class View:
    """How a served resource maps onto the resource that stores it."""

    def __init__(
        self,
        storage: tuple[str, str, str],
        to_storage: Callable[[dict[str, Any]], dict[str, Any]],
        from_storage: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.storage = storage  # (group, version, plural) of the stored resource
        self.to_storage = to_storage
        self.from_storage = from_storage


VIEWS: dict[str, View] = {
    "events.k8s.io/v1/events": View(("", "v1", "events"), _event_to_core, _event_from_core),
}
