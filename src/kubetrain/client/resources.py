"""Resource classes the client talks to, and the names people type for them.

Trainer kinds and JobSet are lightkube generic resources (plain dicts on the wire, so a field the
client does not know survives a round trip). Built-in kinds come from lightkube's models. Custom
resources always get an explicit patch type (merge or apply): strategic merge is 415 on CRs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api import labels as L

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "EXPERIMENT",
    "JOBSET",
    "POD",
    "SUGGESTION",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "TRIAL",
    "KindInfo",
    "resolve_kind",
    "resource_for",
    "resource_for_object",
]


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What the CLI needs to know about a kind: how to ask for it and how to name it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """``trainjob.trainer.kubeflow.org`` / ``pod``: the prefix kubectl prints for ``-o name``."""
        return f"{self.kind.lower()}.{self.group}" if self.group else self.kind.lower()


TRAINJOB = KindInfo(L.TRAINER_API_VERSION, L.TRAINJOB_KIND, "trainjobs", True)
TRAINING_RUNTIME = KindInfo(
    L.TRAINER_API_VERSION, L.TRAINING_RUNTIME_KIND, "trainingruntimes", True
)
CLUSTER_TRAINING_RUNTIME = KindInfo(
    L.TRAINER_API_VERSION, L.CLUSTER_TRAINING_RUNTIME_KIND, "clustertrainingruntimes", False
)
JOBSET = KindInfo(L.JOBSET_API_VERSION, L.JOBSET_KIND, "jobsets", True)
POD = KindInfo("v1", "Pod", "pods", True)
EVENT = KindInfo("v1", "Event", "events", True)
# Katib's kinds (hyperparameter search), served by the local engine and by Katib on a cluster.
EXPERIMENT = KindInfo("kubeflow.org/v1beta1", "Experiment", "experiments", True)
TRIAL = KindInfo("kubeflow.org/v1beta1", "Trial", "trials", True)
SUGGESTION = KindInfo("kubeflow.org/v1beta1", "Suggestion", "suggestions", True)

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


def resource_for(info: KindInfo) -> Any:
    """The lightkube resource class for ``info`` (generic for custom kinds, a model otherwise)."""
    from lightkube.codecs import resource_registry
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    if info in _CUSTOM:
        group, _, version = info.api_version.partition("/")
        make = create_namespaced_resource if info.namespaced else create_global_resource
        return make(group, version, info.kind, info.plural)
    return resource_registry.load(info.api_version, info.kind)


def resource_for_object(obj: dict[str, Any]) -> Any:
    """The resource class for a loaded document; custom trainer/JobSet kinds are registered first.

    Raises lightkube's ``LoadResourceError`` for a kind it cannot place (an unknown CRD).
    """
    from lightkube.codecs import resource_registry

    for info in _CUSTOM:
        if obj.get("apiVersion") == info.api_version and obj.get("kind") == info.kind:
            return resource_for(info)
    return resource_registry.load(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


def info_for_object(obj: dict[str, Any]) -> KindInfo:
    """A :class:`KindInfo` for any object the registry knows (used to print ``kind.group/name``)."""
    from lightkube import LoadResourceError

    from kubetrain.client.errors import ClientError

    for info in (*_CUSTOM, POD):
        if obj.get("apiVersion") == info.api_version and obj.get("kind") == info.kind:
            return info
    try:
        res = resource_for_object(obj)
    except LoadResourceError:
        raise ClientError(
            f"unknown kind {obj.get('kind')!r} (apiVersion {obj.get('apiVersion')!r}): "
            "kubetrain knows the Trainer kinds, JobSet and the built-in Kubernetes kinds"
        ) from None
    api = res._api_info  # lightkube keeps plural and scope here; there is no public accessor
    from lightkube.core import resource as r

    return KindInfo(
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        api.plural,
        issubclass(res, r.NamespacedResource),
    )
