"""Wire types of TrainJob, TrainingRuntime, ClusterTrainingRuntime (trainer.kubeflow.org/v1alpha1)
and the JobSet v1alpha2 API they embed.

Objects stay plain JSON-like dicts at run time (fast, and byte-faithful on the wire); these
TypedDicts only give them names for mypy. They are also the single description of our own kinds:
the ``Annotated`` markers (see :mod:`kubetrain.api.markers`) are what ``tools/gen_crds.py`` turns
into the CRD schemas, from which load-time defaults and validation are read back. Field order
follows the Kubernetes convention (as written by users), which is also how dumps are ordered.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required, TypedDict

from kubetrain.api.core import (
    Condition,
    EnvVar,
    JobTemplateSpec,
    LocalObjectReference,
    ObjectMeta,
    ResourceRequirements,
    Volume,
)
from kubetrain.api.markers import (
    Default,
    Doc,
    Format,
    ListMap,
    ListType,
    Maximum,
    MaxItems,
    MaxLength,
    Minimum,
    MinItems,
    MinLength,
    MinProperties,
    OpenAPI,
    Rule,
)

__all__ = [
    "ClusterTrainingRuntime",
    "ContainerNames",
    "ContainerPatch",
    "Coordinator",
    "CoschedulingPodGroupPolicySource",
    "DatasetInitializer",
    "DependsOn",
    "EmbeddedObjectMeta",
    "EnvInjection",
    "EnvInjectionTarget",
    "FailurePolicy",
    "FailurePolicyRule",
    "FluxMLPolicySource",
    "Initializer",
    "Int32",
    "Int64",
    "JAXMLPolicySource",
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "JobSetTemplatePatch",
    "JobSetTemplateSpec",
    "JobStatus",
    "JobTemplatePatch",
    "JobTemplateSpecPatch",
    "MLPolicy",
    "MPIMLPolicySource",
    "ModelInitializer",
    "Network",
    "NetworkTopologySpec",
    "Obj",
    "PodGroupPolicy",
    "PodSpecPatch",
    "PodTemplatePatch",
    "ReplicatedJob",
    "ReplicatedJobPatch",
    "ReplicatedJobStatus",
    "RuntimePatch",
    "RuntimeRef",
    "StartupPolicy",
    "SuccessPolicy",
    "Time",
    "TorchMLPolicySource",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "TrainingRuntimeSpecPatch",
    "VolcanoPodGroupPolicySource",
    "VolumeClaimPolicy",
    "VolumeRetentionPolicy",
    "XGBoostMLPolicySource",
]

# Every Kubernetes object, ours or not, is one of these at run time.
Obj = dict[str, Any]

Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]
Time = Annotated[str, Format("date-time")]

_IMMUTABLE = Rule("self == oldSelf", "field is immutable")
_JOBSET_IMMUTABLE = Rule("self == oldSelf", "Value is immutable")

# core/v1 types that only pass through: their schema is Kubernetes' own.
_SecurityContext = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.SecurityContext")]
_PodSecurityContext = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.PodSecurityContext")]
_Affinity = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.Affinity")]
_Toleration = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.Toleration")]
_SchedulingGate = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.PodSchedulingGate")]
_VolumeMount = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.VolumeMount")]
_PVC = Annotated[dict[str, Any], OpenAPI("io.k8s.api.core.v1.PersistentVolumeClaim")]
_EnvList = Annotated[list[EnvVar], ListMap("name"), MaxItems(128)]


class EmbeddedObjectMeta(TypedDict, total=False):
    """The metadata a template may carry (what an embedded ObjectMeta keeps in a CRD)."""

    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]


_Meta = EmbeddedObjectMeta

# ============================================================================================
# JobSet jobset.x-k8s.io/v1alpha2 (the version embedded by Trainer v2.3)
# ============================================================================================


class DependsOn(TypedDict, total=False):
    """A replicated job this one waits for, and the state it waits for."""

    name: Required[str]
    status: Required[Literal["Ready", "Complete"]]


class ReplicatedJob(TypedDict, total=False):
    """A Job template run `replicas` times as part of the JobSet."""

    name: Required[str]
    groupName: Annotated[str, Default("default")]
    template: Required[JobTemplateSpec]
    replicas: Annotated[Int32, Default(1)]
    dependsOn: Annotated[list[DependsOn], ListMap("name"), MaxItems(5), _JOBSET_IMMUTABLE]


class Network(TypedDict, total=False):
    """DNS for the JobSet's pods: hostnames under a headless service."""

    enableDNSHostnames: bool
    subdomain: str
    publishNotReadyAddresses: bool


class SuccessPolicy(TypedDict, total=False):
    """When the JobSet counts as succeeded."""

    operator: Required[Literal["All", "Any"]]
    targetReplicatedJobs: Annotated[list[str], ListType("atomic")]


class FailurePolicyRule(TypedDict, total=False):
    """What to do when a Job fails for a matching reason."""

    name: Required[str]
    action: Required[
        Literal[
            "FailJobSet",
            "RestartJobSet",
            "RestartJobSetAndIgnoreMaxRestarts",
            "RestartJob",
            "RestartJobAndIgnoreMaxRestarts",
        ]
    ]
    onJobFailureReasons: list[str]
    onJobFailureMessagePatterns: list[str]
    targetReplicatedJobs: Annotated[list[str], ListType("atomic")]


class FailurePolicy(TypedDict, total=False):
    """How failed Jobs restart or fail the JobSet."""

    maxRestarts: Int32
    restartStrategy: Annotated[
        Literal["Recreate", "BlockingRecreate", "InPlaceRestart"], Default("Recreate")
    ]
    rules: list[FailurePolicyRule]


class StartupPolicy(TypedDict, total=False):
    """Whether replicated jobs start in order or all at once."""

    startupPolicyOrder: Required[Literal["AnyOrder", "InOrder"]]


class Coordinator(TypedDict, total=False):
    """The pod whose address every pod of the JobSet is told."""

    replicatedJob: Required[str]
    jobIndex: int
    podIndex: int


class VolumeRetentionPolicy(TypedDict, total=False):
    """What happens to the claims when the JobSet is deleted."""

    whenDeleted: Annotated[Literal["Delete", "Retain"], Default("Delete")]


class VolumeClaimPolicy(TypedDict, total=False):
    """PersistentVolumeClaims created for, and shared by, the JobSet's pods."""

    templates: Annotated[list[_PVC], ListType("atomic"), MaxItems(50)]
    retentionPolicy: VolumeRetentionPolicy


class JobSetSpec(TypedDict, total=False):
    """The desired state of a JobSet."""

    replicatedJobs: Annotated[list[ReplicatedJob], ListMap("name")]
    network: Annotated[Network, _JOBSET_IMMUTABLE]
    successPolicy: Annotated[SuccessPolicy, _JOBSET_IMMUTABLE]
    failurePolicy: Annotated[FailurePolicy, _JOBSET_IMMUTABLE]
    startupPolicy: Annotated[StartupPolicy, _JOBSET_IMMUTABLE]
    suspend: bool
    coordinator: Coordinator
    managedBy: str
    ttlSecondsAfterFinished: Annotated[Int32, Minimum(0)]
    volumeClaimPolicies: Annotated[
        list[
            Annotated[
                VolumeClaimPolicy,
                Rule(
                    "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
                    "namespace cannot be set for VolumeClaimPolicies templates",
                ),
            ]
        ],
        ListType("atomic"),
        MaxItems(50),
        _JOBSET_IMMUTABLE,
    ]


# Cross-field rule on every JobSetSpec (ours and the one embedded in runtimes).
JOBSET_SPEC_RULES = (
    Rule(
        "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
        "self.replicatedJobs.exists(x, has(x.dependsOn)))",
        "StartupPolicy and DependsOn APIs are mutually exclusive",
    ),
)
_JobSetSpec = Annotated[JobSetSpec, *JOBSET_SPEC_RULES]


class ReplicatedJobStatus(TypedDict, total=False):
    """Pod-level counters of one replicated job."""

    name: Required[str]
    ready: Required[Int32]
    succeeded: Required[Int32]
    failed: Required[Int32]
    active: Required[Int32]
    suspended: Required[Int32]
    jobRestarts: Annotated[list[Int32], ListType("atomic"), MaxItems(1024)]
    jobRestartsCountTowardsMax: Annotated[list[Int32], ListType("atomic"), MaxItems(1024)]


class JobSetStatus(TypedDict, total=False):
    """The observed state of a JobSet."""

    conditions: Annotated[list[Condition], ListMap("type")]
    restarts: Int32
    restartsCountTowardsMax: Int32
    currentInPlaceRestartAttempt: Annotated[Int32, Minimum(0)]
    previousInPlaceRestartAttempt: Annotated[Int32, Minimum(0)]
    terminalState: str
    replicatedJobsStatus: Annotated[list[ReplicatedJobStatus], ListMap("name")]


class JobSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: _JobSetSpec
    status: JobSetStatus


# ============================================================================================
# TrainingRuntime / ClusterTrainingRuntime
# ============================================================================================


ContainerNames = Annotated[
    list[Annotated[str, MaxLength(63)]],
    ListType("set"),
    MinItems(1),
    MaxItems(8),
    Rule(
        "!self.exists(c, c == 'node')",
        "containerNames must not include the main node container because PET_* envs are "
        "always injected into it",
    ),
]


class EnvInjectionTarget(TypedDict, total=False):
    """A job and the containers in it that get the PET_* variables too."""

    jobName: Required[Annotated[str, MinLength(1), MaxLength(253)]]
    containerNames: Required[ContainerNames]


class EnvInjection(TypedDict, total=False):
    """Extra containers that receive torchrun's PET_* environment variables."""

    targets: Annotated[list[EnvInjectionTarget], ListMap("jobName"), MaxItems(16)]


class TorchMLPolicySource(TypedDict, total=False):
    """Run the trainer with torchrun (PET_* environment variables)."""

    envInjection: EnvInjection


class MPIMLPolicySource(TypedDict, total=False):
    """Run the trainer with mpirun over SSH, with a generated hostfile."""

    numProcPerNode: Annotated[Int32, Default(1)]
    mpiImplementation: Annotated[Literal["OpenMPI", ""], Default("OpenMPI")]
    sshAuthMountPath: Annotated[str, Default("/root/.ssh"), MaxLength(4096)]
    runLauncherAsNode: Annotated[bool, Default(False)]


class JAXMLPolicySource(TypedDict, total=False):
    """Run the trainer as JAX distributed processes."""


class XGBoostMLPolicySource(TypedDict, total=False):
    """Run the trainer as XGBoost Rabit workers."""


class FluxMLPolicySource(TypedDict, total=False):
    """Run the trainer under the Flux Framework."""

    numProcPerNode: Annotated[
        Int32, Default(1), Rule("self >= 1", "NumProcPerNode in fluxPolicy must be >= 1")
    ]


class MLPolicy(TypedDict, total=False):
    """How the training processes find each other; at most one framework may be set."""

    numNodes: Int32
    torch: TorchMLPolicySource
    mpi: MPIMLPolicySource
    jax: JAXMLPolicySource
    xgboost: XGBoostMLPolicySource
    flux: FluxMLPolicySource


_MLPolicy = Annotated[
    MLPolicy,
    Rule(
        "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
        ".filter(x, x).size() <= 1",
        "Only one of the policy can be configured",
    ),
]


class CoschedulingPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with the scheduler-plugins coscheduling plugin."""

    scheduleTimeoutSeconds: Annotated[Int32, Default(60)]


class NetworkTopologySpec(TypedDict, total=False):
    """Network-topology-aware placement with Volcano."""

    mode: Annotated[Literal["hard", "soft"], Default("hard")]
    highestTierAllowed: Annotated[int, Default(1)]


class VolcanoPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with Volcano."""

    networkTopology: NetworkTopologySpec


class PodGroupPolicy(TypedDict, total=False):
    """Gang scheduling: all pods of a TrainJob start together or not at all."""

    coscheduling: CoschedulingPodGroupPolicySource
    volcano: VolcanoPodGroupPolicySource


class JobSetTemplateSpec(TypedDict, total=False):
    """The JobSet every TrainJob of this runtime is made from."""

    metadata: _Meta
    spec: _JobSetSpec


class TrainingRuntimeSpec(TypedDict, total=False):
    """ML policy, gang-scheduling policy and JobSet template of a runtime."""

    mlPolicy: _MLPolicy
    podGroupPolicy: PodGroupPolicy
    template: Annotated[JobSetTemplateSpec, MinProperties(1)]


class TrainingRuntime(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: Annotated[TrainingRuntimeSpec, MinProperties(1)]


# Same shape, cluster-scoped.
ClusterTrainingRuntime = TrainingRuntime

# ============================================================================================
# TrainJob
# ============================================================================================


class RuntimeRef(TypedDict, total=False):
    """The TrainingRuntime or ClusterTrainingRuntime a TrainJob runs on."""

    name: Required[Annotated[str, MinLength(1), MaxLength(253), Doc("Name of the runtime.")]]
    apiGroup: Annotated[
        str, Default("trainer.kubeflow.org"), MaxLength(253), Doc("API group of the runtime.")
    ]
    kind: Annotated[
        str,
        Default("ClusterTrainingRuntime"),
        MaxLength(253),
        Doc("TrainingRuntime (same namespace) or ClusterTrainingRuntime."),
    ]


_StorageUri = Annotated[
    str,
    MaxLength(2048),
    Rule(
        "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        "storageUri may be empty, or it must be a valid URI (scheme://...)",
    ),
]


class DatasetInitializer(TypedDict, total=False):
    """Where the dataset-initializer job downloads the dataset from."""

    storageUri: _StorageUri
    env: _EnvList
    secretRef: LocalObjectReference


class ModelInitializer(TypedDict, total=False):
    """Where the model-initializer job downloads the model from."""

    storageUri: _StorageUri
    env: _EnvList
    secretRef: LocalObjectReference


class Initializer(TypedDict, total=False):
    """Data and model downloads that run before training."""

    dataset: DatasetInitializer
    model: ModelInitializer


_Strings = Annotated[list[Annotated[str, MaxLength(1048576)]], ListType("atomic"), MaxItems(128)]


class Trainer(TypedDict, total=False):
    """What the trainer nodes run, and on how many nodes."""

    image: Annotated[str, MaxLength(500), Doc("Image of the trainer's node container.")]
    command: Annotated[_Strings, Doc("Replaces the node container's command.")]
    args: Annotated[_Strings, Doc("Replaces the node container's args.")]
    env: Annotated[_EnvList, Doc("Added to (or replacing by name) the node container's env.")]
    numNodes: Annotated[Int32, Doc("Number of training nodes; overrides mlPolicy.numNodes.")]
    resourcesPerNode: Annotated[
        ResourceRequirements, Doc("Resources of each node container, merged over the runtime's.")
    ]
    numProcPerNode: Annotated[Int32, Doc("Training processes per node.")]


class ContainerPatch(TypedDict, total=False):
    """Changes to one container of the runtime's pod template."""

    name: Required[Annotated[str, MinLength(1), MaxLength(253)]]
    env: _EnvList
    # Keyed by name here (core/v1 keys container volumeMounts by mountPath).
    volumeMounts: Annotated[list[_VolumeMount], ListMap("name"), MaxItems(128)]
    securityContext: _SecurityContext


_ContainerPatches = Annotated[list[ContainerPatch], ListMap("name"), MaxItems(64), _IMMUTABLE]


class PodSpecPatch(TypedDict, total=False):
    """Changes to the runtime's pod spec."""

    serviceAccountName: Annotated[str, MaxLength(253), _IMMUTABLE]
    volumes: Annotated[list[Volume], ListMap("name"), MaxItems(128), _IMMUTABLE]
    initContainers: _ContainerPatches
    containers: _ContainerPatches
    imagePullSecrets: Annotated[
        list[LocalObjectReference], ListMap("name"), MaxItems(64), _IMMUTABLE
    ]
    securityContext: Annotated[_PodSecurityContext, _IMMUTABLE]
    nodeSelector: dict[str, str]
    affinity: _Affinity
    tolerations: Annotated[list[_Toleration], ListType("atomic"), MaxItems(128)]
    schedulingGates: Annotated[list[_SchedulingGate], ListMap("name"), MaxItems(16)]
    terminationGracePeriodSeconds: Annotated[Int64, Minimum(0), _IMMUTABLE]


class PodTemplatePatch(TypedDict, total=False):
    """Changes to the runtime's pod template."""

    metadata: _Meta
    spec: PodSpecPatch


class JobTemplateSpecPatch(TypedDict, total=False):
    """Changes to the runtime's Job spec."""

    template: PodTemplatePatch


class JobTemplatePatch(TypedDict, total=False):
    """Changes to the runtime's Job template."""

    metadata: _Meta
    spec: JobTemplateSpecPatch


class ReplicatedJobPatch(TypedDict, total=False):
    """Changes to one replicated job of the runtime, by name."""

    name: Required[Annotated[str, MinLength(1), MaxLength(253)]]
    template: JobTemplatePatch


class JobSetSpecPatch(TypedDict, total=False):
    """Changes to the runtime's JobSet spec."""

    replicatedJobs: Annotated[list[ReplicatedJobPatch], ListMap("name"), MaxItems(100)]


class JobSetTemplatePatch(TypedDict, total=False):
    """Changes to the runtime's JobSet template."""

    metadata: _Meta
    spec: JobSetSpecPatch


class TrainingRuntimeSpecPatch(TypedDict, total=False):
    """Changes to the runtime this TrainJob runs on."""

    template: JobSetTemplatePatch


class RuntimePatch(TypedDict, total=False):
    """One client's changes to the runtime, keyed by that client (the manager)."""

    manager: Required[Annotated[str, MinLength(1), MaxLength(253), _IMMUTABLE]]
    time: Time
    trainingRuntimeSpec: TrainingRuntimeSpecPatch


class TrainJobSpec(TypedDict, total=False):
    """The desired state of a TrainJob."""

    runtimeRef: Required[Annotated[RuntimeRef, _IMMUTABLE]]
    initializer: Annotated[Initializer, _IMMUTABLE]
    trainer: Annotated[Trainer, _IMMUTABLE]
    runtimePatches: Annotated[
        list[RuntimePatch],
        ListMap("manager"),
        MaxItems(16),
        Doc("Changes to the runtime's JobSet template, one entry per client."),
    ]
    suspend: Annotated[bool, Default(False), Doc("Whether the TrainJob's pods should not run.")]
    managedBy: Annotated[
        str,
        Default("trainer.kubeflow.org/trainjob-controller"),
        MaxLength(253),
        Rule(
            "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
            "ManagedBy must be trainer.kubeflow.org/trainjob-controller or "
            "kueue.x-k8s.io/multikueue if set",
        ),
        _IMMUTABLE,
    ]
    activeDeadlineSeconds: Annotated[
        Int64,
        Minimum(1),
        _IMMUTABLE,
        Doc("Seconds the TrainJob may run (not counting suspension) before it fails."),
    ]


class JobStatus(TypedDict, total=False):
    """Pod counters of one of the TrainJob's jobs."""

    name: Required[Annotated[str, MinLength(1), MaxLength(253)]]
    ready: Required[Annotated[Int32, Minimum(0)]]
    succeeded: Required[Annotated[Int32, Minimum(0)]]
    failed: Required[Annotated[Int32, Minimum(0)]]
    active: Required[Annotated[Int32, Minimum(0)]]
    suspended: Required[Annotated[Int32, Minimum(0)]]


class Metric(TypedDict, total=False):
    """One training metric as reported by the training code."""

    name: Required[Annotated[str, MinLength(1), MaxLength(64)]]
    value: Required[Annotated[str, MinLength(1), MaxLength(64)]]


class TrainerStatus(TypedDict, total=False):
    """Progress reported by the training code itself."""

    progressPercentage: Annotated[Int32, Minimum(0), Maximum(100)]
    estimatedRemainingSeconds: Annotated[Int32, Minimum(0)]
    metrics: Annotated[list[Metric], ListType("atomic"), MaxItems(256)]
    lastUpdatedTime: Time


class TrainJobStatus(TypedDict, total=False):
    """The observed state of a TrainJob."""

    conditions: Annotated[list[Condition], ListMap("type"), MaxItems(8)]
    jobsStatus: Annotated[list[JobStatus], ListMap("name"), MaxItems(100)]
    trainerStatus: Annotated[
        TrainerStatus,
        Rule(
            "has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present"
        ),
    ]


class TrainJob(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: TrainJobSpec
    status: Annotated[TrainJobStatus, MinProperties(1)]


# Object-level CEL rules of each kind (the generator puts them on the schema root).
ROOT_RULES: dict[str, tuple[Rule, ...]] = {
    "TrainJob": (
        Rule(
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "metadata.name must match RFC 1035 DNS label format",
        ),
        Rule("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters"),
    ),
}
