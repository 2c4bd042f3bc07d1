"""Labels, annotations, reasons and messages that JobSet and the Job controller write.

Clients (the official SDK, kubectl users, Trainer's own status code) select pods and read
conditions by these exact strings, so they are spelled once, as JobSet v0.12 and Kubernetes
1.3x spell them: here the ones only the executor writes; in :mod:`kubetrain.api.labels` the
ones Trainer writes or reads too (JobSet name, replicated job, indexes, restart attempt).
"""

from __future__ import annotations

__all__ = [
    "ALL_JOBS_COMPLETED_MESSAGE",
    "ALL_JOBS_COMPLETED_REASON",
    "BACKOFF_LIMIT_EXCEEDED_MESSAGE",
    "BACKOFF_LIMIT_EXCEEDED_REASON",
    "COND_COMPLETED",
    "COND_FAILED",
    "COND_RESTARTING",
    "COND_STARTUP_COMPLETED",
    "COND_STARTUP_IN_PROGRESS",
    "COND_SUSPENDED",
    "CONTROLLER_UID",
    "CONTROLLER_UID_LEGACY",
    "FAILED_JOBS_MESSAGE",
    "FAILED_JOBS_REASON",
    "FAIL_JOBSET_ACTION_MESSAGE",
    "FAIL_JOBSET_ACTION_REASON",
    "GLOBAL_REPLICAS",
    "GROUP_NAME",
    "GROUP_REPLICAS",
    "INORDER_COMPLETED_MESSAGE",
    "INORDER_COMPLETED_REASON",
    "INORDER_IN_PROGRESS_MESSAGE",
    "INORDER_IN_PROGRESS_REASON",
    "JOBSET_UID",
    "JOB_GROUP_INDEX",
    "JOB_KEY",
    "JOB_NAME_LEGACY",
    "REACHED_MAX_RESTARTS_MESSAGE",
    "REACHED_MAX_RESTARTS_REASON",
    "RESTARTING_DEFAULT_POLICY_REASON",
    "RESTARTING_JOBSET_COMPLETED_REASON",
    "RESTARTING_JOBSET_FAILED_MESSAGE",
    "RESTARTING_JOBSET_FAILED_REASON",
    "RESTARTING_JOBSET_SUSPENDED_REASON",
    "RESTARTING_JOBS_READY_MESSAGE",
    "RESTARTING_JOBS_READY_REASON",
    "RESTART_IGNORE_MAX_ACTION_MESSAGE",
    "RESTART_IGNORE_MAX_ACTION_REASON",
    "RESTART_JOBSET_ACTION_MESSAGE",
    "RESTART_JOBSET_ACTION_REASON",
    "RESUMED_MESSAGE",
    "RESUMED_REASON",
    "SUSPENDED_MESSAGE",
    "SUSPENDED_REASON",
]


# --- written by JobSet on Jobs and their pod templates (labels and annotations alike) -------
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"

# --- written by the Job controller on pods -------------------------------------------------
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
CONTROLLER_UID_LEGACY = "controller-uid"
JOB_NAME_LEGACY = "job-name"
BACKOFF_LIMIT_EXCEEDED_REASON = "BackoffLimitExceeded"
BACKOFF_LIMIT_EXCEEDED_MESSAGE = "Job has reached the specified backoff limit"

# --- JobSet condition types, reasons and messages --------------------------------------------
COND_COMPLETED = "Completed"
COND_FAILED = "Failed"
COND_SUSPENDED = "Suspended"
COND_RESTARTING = "RestartingJobSet"
COND_STARTUP_IN_PROGRESS = "StartupPolicyInProgress"
COND_STARTUP_COMPLETED = "StartupPolicyCompleted"

ALL_JOBS_COMPLETED_REASON = "AllJobsCompleted"
ALL_JOBS_COMPLETED_MESSAGE = "jobset completed successfully"
FAILED_JOBS_REASON = "FailedJobs"
FAILED_JOBS_MESSAGE = "jobset failed due to one or more job failures"
REACHED_MAX_RESTARTS_REASON = "ReachedMaxRestarts"
REACHED_MAX_RESTARTS_MESSAGE = "jobset failed due to reaching max number of restarts"
SUSPENDED_REASON = "SuspendedJobs"
SUSPENDED_MESSAGE = "jobset is suspended"
RESUMED_REASON = "ResumeJobs"
RESUMED_MESSAGE = "jobset is resumed"
INORDER_IN_PROGRESS_REASON = "InOrderStartupPolicyInProgress"
INORDER_IN_PROGRESS_MESSAGE = "in order startup policy is in progress"
INORDER_COMPLETED_REASON = "InOrderStartupPolicyCompleted"
INORDER_COMPLETED_MESSAGE = "in order startup policy has completed"
FAIL_JOBSET_ACTION_REASON = "FailJobSetFailurePolicyAction"
FAIL_JOBSET_ACTION_MESSAGE = "applying FailJobSet failure policy action"
RESTART_JOBSET_ACTION_REASON = "RestartJobSetFailurePolicyAction"
RESTART_JOBSET_ACTION_MESSAGE = "applying RestartJobSet failure policy action"
RESTART_IGNORE_MAX_ACTION_REASON = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
RESTART_IGNORE_MAX_ACTION_MESSAGE = (
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
)
RESTARTING_DEFAULT_POLICY_REASON = "DefaultFailurePolicy"
RESTARTING_JOBS_READY_REASON = "JobsReady"
RESTARTING_JOBS_READY_MESSAGE = "all jobs are ready"
RESTARTING_JOBSET_FAILED_REASON = "JobSetFailed"
RESTARTING_JOBSET_FAILED_MESSAGE = "jobset failed"
RESTARTING_JOBSET_COMPLETED_REASON = "JobSetCompleted"
RESTARTING_JOBSET_SUSPENDED_REASON = "JobSetSuspended"
