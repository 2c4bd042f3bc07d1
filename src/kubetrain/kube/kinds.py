"""The kinds the controller reads and writes, with their REST names.

A Plan may hold any of the kinds below; an unknown kind in a Plan is a programming error in the
runtime layer, reported as a reconcile error rather than guessed at (guessing plurals is how
clients end up at the wrong URL).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "CONFIGMAP",
    "EVENT",
    "JOBSET",
    "LEASE",
    "POD",
    "SECRET",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "Kind",
    "kind_for",
]


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind and its REST names: how to ask the API for it and how kubectl names it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def qualified(self) -> str:
        """``trainjob.trainer.kubeflow.org`` / ``pod``: the prefix kubectl prints for ``-o name``."""
        return f"{self.kind.lower()}.{self.group}" if self.group else self.kind.lower()


TRAINJOB = Kind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs")
TRAINING_RUNTIME = Kind("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes")
CLUSTER_TRAINING_RUNTIME = Kind(
    "trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False
)
JOBSET = Kind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets")
CONFIGMAP = Kind("v1", "ConfigMap", "configmaps")
SECRET = Kind("v1", "Secret", "secrets")
EVENT = Kind("v1", "Event", "events")
POD = Kind("v1", "Pod", "pods")
LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases")
_POD_GROUP_X = Kind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups")
_POD_GROUP_VOLCANO = Kind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups")

_ALL = (
    TRAINJOB,
    TRAINING_RUNTIME,
    CLUSTER_TRAINING_RUNTIME,
    JOBSET,
    CONFIGMAP,
    SECRET,
    EVENT,
    POD,
    LEASE,
    _POD_GROUP_X,
    _POD_GROUP_VOLCANO,
)
_BY_TYPE = {(k.api_version, k.kind): k for k in _ALL}


def kind_for(api_version: str, kind: str) -> Kind:
    """The known ``Kind`` for ``apiVersion``/``kind``; ``KeyError`` names it when unknown."""
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        raise KeyError(f"the controller does not know the kind {kind} in {api_version}") from None
