"""The API server's audit log: what RBAC decided, one ``audit.k8s.io/v1`` Event per line.

kube-apiserver writes such a log with ``--audit-log-path``; ``kubetrain serve --audit-log-path``
writes one too, of the requests the RBAC authorizer decides: every user's but system:masters'
(the privileged-group authorizer lets those through before RBAC is asked, so the admin's
kubectl is not logged). Each Event is at level ``Metadata`` and stage ``RequestReceived`` (it is
written when the request is authorised, before it runs), with kube-apiserver's annotations
``authorization.k8s.io/decision`` (``allow`` or ``forbid``) and ``authorization.k8s.io/reason``.
``requestURI`` is the path without its query.

`request_of` reads an Event back into the user and `rbac.Attributes` the authorizer saw, so a
recorded run can be decided again under another policy (the install test removes one rule of
the controller's ClusterRole at a time and asks which recorded requests it would refuse).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from kubetrain.api import meta
from kubetrain.api.access import as_dict, as_str
from kubetrain.local.apiserver.rbac import Attributes, Decision, User, user_from_info, user_info

__all__ = ["DECISION", "REASON", "AuditLog", "read_events", "request_of"]

_API_VERSION = "audit.k8s.io/v1"
# kube-apiserver's annotation keys for the authorizer's answer.
DECISION = "authorization.k8s.io/decision"
REASON = "authorization.k8s.io/reason"


class AuditLog:
    """Appends one Event per authorised request to ``path`` (created 0600 if absent)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Line-buffered: a reader sees every request that has been answered.
        self._out: TextIO | None = path.open("a", buffering=1, encoding="utf-8")
        path.chmod(0o600)

    def record(self, user: User, attributes: Attributes, decision: Decision) -> None:
        if self._out is None:
            return
        stamp = meta.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": _API_VERSION,
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "RequestReceived",
            "requestURI": attributes.path,
            "verb": attributes.verb,
            "user": user_info(user),
        }
        if attributes.resource_request:
            ref = {
                "resource": attributes.resource,
                "namespace": attributes.namespace,
                "name": attributes.name,
                "apiGroup": attributes.api_group,
                "apiVersion": attributes.api_version,
                "subresource": attributes.subresource,
            }
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        event["requestReceivedTimestamp"] = stamp
        event["stageTimestamp"] = stamp
        event["annotations"] = {
            DECISION: "allow" if decision.allowed else "forbid",
            REASON: decision.reason,
        }
        self._out.write(json.dumps(event, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The Events of an audit log, in order (a torn last line, still being written, is left)."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):
                yield as_dict(json.loads(line))


def request_of(event: Mapping[str, Any]) -> tuple[User, Attributes, bool]:
    """Who asked what in an Event, and whether RBAC allowed it."""
    user = user_from_info(as_dict(event.get("user"))) or User("")
    ref = event.get("objectRef")
    path = as_str(event.get("requestURI"))
    if ref is None:
        attributes = Attributes(verb=as_str(event.get("verb")), path=path, resource_request=False)
    else:
        obj = as_dict(ref)
        attributes = Attributes(
            verb=as_str(event.get("verb")),
            resource=as_str(obj.get("resource")),
            api_group=as_str(obj.get("apiGroup")),
            api_version=as_str(obj.get("apiVersion")),
            namespace=as_str(obj.get("namespace")),
            name=as_str(obj.get("name")),
            subresource=as_str(obj.get("subresource")),
            path=path,
        )
    allowed = as_dict(event.get("annotations")).get(DECISION) == "allow"
    return user, attributes, allowed
