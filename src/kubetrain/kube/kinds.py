"""The kinds the controller and the local executor read and write, with their REST names.

A Plan may hold any of the kinds below; an unknown kind in a Plan is a programming error in the
runtime layer, reported as a reconcile error rather than guessed at (guessing plurals is how
clients end up at the wrong URL).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "API_SERVICE",
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "CLUSTER_TRAINING_RUNTIME",
    "CONFIGMAP",
    "CUSTOM_RESOURCE_DEFINITION",
    "DAEMON_SET",
    "DEPLOYMENT",
    "ENDPOINTS",
    "ENDPOINT_SLICE",
    "EVENT",
    "EVENTS_EVENT",
    "EXPERIMENT",
    "JOB",
    "JOBSET",
    "LEADER_WORKER_SET",
    "LEASE",
    "LIMIT_RANGE",
    "MUTATING_WEBHOOK_CONFIGURATION",
    "NAMESPACE",
    "NODE",
    "POD",
    "POD_GROUP",
    "PRIORITY_CLASS",
    "REPLICATION_CONTROLLER",
    "REPLICA_SET",
    "ROLE",
    "ROLE_BINDING",
    "RUNTIME_CLASS",
    "SECRET",
    "SERVICE",
    "SERVICE_ACCOUNT",
    "STATEFUL_SET",
    "SUGGESTION",
    "TOKEN_REVIEW",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "TRIAL",
    "VALIDATING_WEBHOOK_CONFIGURATION",
    "VOLCANO_POD_GROUP",
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
# Katib's kinds: hyperparameter searches, served by the local engine and by Katib on a cluster.
EXPERIMENT = Kind("kubeflow.org/v1beta1", "Experiment", "experiments")
TRIAL = Kind("kubeflow.org/v1beta1", "Trial", "trials")
SUGGESTION = Kind("kubeflow.org/v1beta1", "Suggestion", "suggestions")
POD_GROUP = Kind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups")
VOLCANO_POD_GROUP = Kind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups")
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False)
TOKEN_REVIEW = Kind("authentication.k8s.io/v1", "TokenReview", "tokenreviews", False)
VALIDATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io/v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    False,
)
MUTATING_WEBHOOK_CONFIGURATION = Kind(
    "admissionregistration.k8s.io/v1",
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    False,
)
# The core kinds the local engine serves next to a TrainJob (workload controllers, Services,
# RBAC objects), for the controllers and tools that read and write them.
JOB = Kind("batch/v1", "Job", "jobs")
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
REPLICA_SET = Kind("apps/v1", "ReplicaSet", "replicasets")
DAEMON_SET = Kind("apps/v1", "DaemonSet", "daemonsets")
STATEFUL_SET = Kind("apps/v1", "StatefulSet", "statefulsets")
REPLICATION_CONTROLLER = Kind("v1", "ReplicationController", "replicationcontrollers")
SERVICE = Kind("v1", "Service", "services")
ENDPOINTS = Kind("v1", "Endpoints", "endpoints")
ENDPOINT_SLICE = Kind("discovery.k8s.io/v1", "EndpointSlice", "endpointslices")
SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")
NAMESPACE = Kind("v1", "Namespace", "namespaces", False)
NODE = Kind("v1", "Node", "nodes", False)
ROLE = Kind("rbac.authorization.k8s.io/v1", "Role", "roles")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False)
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings")
CLUSTER_ROLE_BINDING = Kind(
    "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False
)
API_SERVICE = Kind("apiregistration.k8s.io/v1", "APIService", "apiservices", False)
# The data cache runs as a LeaderWorkerSet (the cache initializer makes it).
LEADER_WORKER_SET = Kind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets")

# Kinds the embedded API server serves that no controller of kubetrain reads or writes.
EVENTS_EVENT = Kind("events.k8s.io/v1", "Event", "events")
LIMIT_RANGE = Kind("v1", "LimitRange", "limitranges")
RUNTIME_CLASS = Kind("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False)
CUSTOM_RESOURCE_DEFINITION = Kind(
    "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False
)

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
    EXPERIMENT,
    TRIAL,
    SUGGESTION,
    POD_GROUP,
    VOLCANO_POD_GROUP,
    PRIORITY_CLASS,
    TOKEN_REVIEW,
    VALIDATING_WEBHOOK_CONFIGURATION,
    MUTATING_WEBHOOK_CONFIGURATION,
    JOB,
    DEPLOYMENT,
    REPLICA_SET,
    DAEMON_SET,
    STATEFUL_SET,
    REPLICATION_CONTROLLER,
    SERVICE,
    ENDPOINTS,
    ENDPOINT_SLICE,
    SERVICE_ACCOUNT,
    NAMESPACE,
    NODE,
    ROLE,
    CLUSTER_ROLE,
    ROLE_BINDING,
    CLUSTER_ROLE_BINDING,
    API_SERVICE,
    LEADER_WORKER_SET,
    EVENTS_EVENT,
    LIMIT_RANGE,
    RUNTIME_CLASS,
    CUSTOM_RESOURCE_DEFINITION,
)
_BY_TYPE = {(k.api_version, k.kind): k for k in _ALL}


def kind_for(api_version: str, kind: str) -> Kind:
    """The known ``Kind`` for ``apiVersion``/``kind``; ``KeyError`` names it when unknown."""
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        raise KeyError(f"the controller does not know the kind {kind} in {api_version}") from None
