"""Resource classes the client talks to, and the names people type for them.

Objects stay plain dicts on the wire, so a field the client does not know survives a round trip.
The Trainer kinds, JobSet, Pods and Events are known here; any other kind is placed by the
server's discovery (as kubectl does). Custom resources always get an explicit patch type (merge
or apply): strategic merge is 415 on CRs.
"""

from __future__ import annotations

from typing import Any

from kubetrain.kube.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    EVENT,
    EXPERIMENT,
    JOBSET,
    POD,
    SUGGESTION,
    TRAINING_RUNTIME,
    TRAINJOB,
    TRIAL,
    Kind,
    kind_for,
)

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "EVENT",
    "EXPERIMENT",
    "JOBSET",
    "POD",
    "SUGGESTION",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "TRIAL",
    "KindInfo",
    "kind_from_discovery",
    "known_kind",
    "resolve_kind",
]


# The kinds come from the one table in kubetrain.kube.kinds.
KindInfo = Kind

_CUSTOM = (
    TRAINJOB,
    TRAINING_RUNTIME,
    CLUSTER_TRAINING_RUNTIME,
    JOBSET,
    EXPERIMENT,
    TRIAL,
    SUGGESTION,
)

# What people type -> kinds. ``runtimes`` means both runtime kinds: users rarely care which.
_ALIASES: dict[str, tuple[KindInfo, ...]] = {}
for _info, _names in (
    (TRAINJOB, ("trainjob", "trainjobs", "tj")),
    (TRAINING_RUNTIME, ("trainingruntime", "trainingruntimes", "tr")),
    (CLUSTER_TRAINING_RUNTIME, ("clustertrainingruntime", "clustertrainingruntimes", "ctr")),
    (POD, ("pod", "pods", "po")),
    (JOBSET, ("jobset", "jobsets", "js")),
    (EXPERIMENT, ("experiment", "experiments", "exp")),
    (TRIAL, ("trial", "trials")),
    (SUGGESTION, ("suggestion", "suggestions")),
):
    for _n in _names:
        _ALIASES[_n] = (_info,)
        _ALIASES[f"{_n}.{_info.group}"] = (_info,)
_ALIASES["runtime"] = _ALIASES["runtimes"] = (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)


def resolve_kind(name: str) -> tuple[KindInfo, ...]:
    """Kinds for a typed name (``trainjobs``, ``tj``, ``runtimes``); empty when unknown."""
    return _ALIASES.get(name.lower(), ())


def known_kind(api_version: str, kind: str) -> KindInfo | None:
    """The :class:`KindInfo` of a kind kubetrain knows without asking the server."""
    try:
        return kind_for(api_version, kind)
    except KeyError:
        return None


def kind_from_discovery(api_version: str, kind: str, resources: list[dict[str, Any]]) -> KindInfo:
    """The :class:`KindInfo` of ``kind`` from the server's ``APIResourceList`` of its version."""
    from kubetrain.client.errors import ClientError

    for res in resources:
        if res.get("kind") == kind and "/" not in str(res.get("name", "")):
            return KindInfo(api_version, kind, str(res["name"]), bool(res.get("namespaced")))
    raise ClientError(
        f"unknown kind {kind!r} (apiVersion {api_version!r}): the server does not serve it"
    )
