"""API group names, kinds and the well-known label, annotation and field-manager names.

These strings are part of the wire contract with kubectl, the official SDK, JobSet and Kueue, so
they are spelled once here and imported everywhere else.
"""

from __future__ import annotations

__all__ = [
    "ANCESTOR_DATASET_INITIALIZER",
    "ANCESTOR_LABEL",
    "ANCESTOR_MODEL_INITIALIZER",
    "ANCESTOR_TRAINER",
    "CLUSTER_TRAINING_RUNTIME_KIND",
    "COORDINATOR_LABEL",
    "DEFAULT_MANAGED_BY",
    "FIELD_MANAGER",
    "FIELD_MANAGER_STATUS",
    "FRAMEWORK_LABEL",
    "JOBSET_API_VERSION",
    "JOBSET_CONTROLLER",
    "JOBSET_GROUP",
    "JOBSET_KIND",
    "JOBSET_NAME_LABEL",
    "JOBSET_VERSION",
    "JOB_COMPLETION_INDEX",
    "JOB_GLOBAL_INDEX_LABEL",
    "JOB_INDEX_LABEL",
    "JOB_NAME_LABEL",
    "KUEUE_MANAGED_BY",
    "KUEUE_PATCH_MANAGER",
    "LOG_ALIASES_ANNOTATION",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_RUNTIMES_INSTALLER",
    "MANAGED_BY_VALUES",
    "POD_GROUP_LABEL",
    "REPLICATED_JOB_NAME_LABEL",
    "REPLICATED_JOB_REPLICAS_LABEL",
    "RESOURCE_IN_USE_FINALIZER",
    "RESTART_ATTEMPT_LABEL",
    "SDK_PATCH_MANAGER",
    "SUPPORT_DEPRECATED",
    "SUPPORT_LABEL",
    "TRAINER_API_VERSION",
    "TRAINER_GROUP",
    "TRAINER_KINDS",
    "TRAINER_VERSION",
    "TRAINING_RUNTIME_KIND",
    "TRAINJOB_KIND",
    "VOLCANO_GROUP_NAME_ANNOTATION",
    "VOLCANO_QUEUE_ANNOTATION",
    "WEBHOOK_VALIDATION_DISABLED",
    "WEBHOOK_VALIDATION_LABEL",
]

# --- groups, versions, kinds ---------------------------------------------------------------
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
TRAINER_API_VERSION = f"{TRAINER_GROUP}/{TRAINER_VERSION}"
TRAINJOB_KIND = "TrainJob"
TRAINING_RUNTIME_KIND = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"
TRAINER_KINDS = (TRAINJOB_KIND, TRAINING_RUNTIME_KIND, CLUSTER_TRAINING_RUNTIME_KIND)

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
JOBSET_KIND = "JobSet"

# --- TrainJob.spec.managedBy ---------------------------------------------------------------
# The CRD defaults managedBy to the first value and its CEL rule allows exactly these two.
DEFAULT_MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
KUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES = (DEFAULT_MANAGED_BY, KUEUE_MANAGED_BY)

# runtimePatches[].manager values written by well-known clients.
SDK_PATCH_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"

# --- labels on runtimes and their job templates ----------------------------------------------
# Job-template label that says which replicatedJob receives spec.trainer / spec.initializer.*.
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
ANCESTOR_DATASET_INITIALIZER = "dataset-initializer"
ANCESTOR_MODEL_INITIALIZER = "model-initializer"

# The official SDK refuses runtimes without the framework label.
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
SUPPORT_LABEL = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED = "deprecated"
WEBHOOK_VALIDATION_LABEL = "trainer.kubeflow.org/webhook-validation"
WEBHOOK_VALIDATION_DISABLED = "disabled"
MANAGED_BY_LABEL = "trainer.kubeflow.org/managed-by"
MANAGED_BY_RUNTIMES_INSTALLER = "runtimes-installer"

# Legacy finalizer: controllers since v2.3 only strip it.
RESOURCE_IN_USE_FINALIZER = "trainer.kubeflow.org/resource-in-use"

# --- labels/annotations written by JobSet and the Job controller on pods ---------------------
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
# JobSet also writes these on Jobs and pods (labels and annotations alike).
REPLICATED_JOB_REPLICAS_LABEL = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"  # index of the Job within its replicatedJob
JOB_GLOBAL_INDEX_LABEL = "jobset.sigs.k8s.io/job-global-index"  # index across the JobSet
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
COORDINATOR_LABEL = "jobset.sigs.k8s.io/coordinator"  # "<pod hostname>.<subdomain>"
# JobSet's own controller name (the implied spec.managedBy of a JobSet).
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
# Both a pod label and a pod annotation; rank env vars read the annotation via the downward API.
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"

# --- gang scheduling ---------------------------------------------------------------------------
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

# --- server-side apply field managers ----------------------------------------------------------
FIELD_MANAGER = "trainer"
FIELD_MANAGER_STATUS = "trainer-status"

# --- kubetrain's own pod annotations -----------------------------------------------------------
# "alias=container,...": pods/log serves the alias's log from that container (Katib's metrics
# collector sidecar, which the SDK reads, is the trial's primary container locally).
LOG_ALIASES_ANNOTATION = "kubetrain.kubeflow.org/log-aliases"
