"""derive_status: upstream's reconcile steps 3-7 (trainer v2.3.0 pkg/controller/trainjob_controller.go) and the JobState table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubetrain.runtime import JobState, derive, derive_status, job_state
from kubetrain.testing import make_trainjob

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
T0 = "2026-05-01T11:00:00Z"
Obj = dict[str, Any]


def cond(
    ctype: str, status: str = "True", reason: str = "R", message: str = "m", t: str = T0
) -> Obj:
    return {
        "type": ctype,
        "status": status,
        "lastTransitionTime": t,
        "reason": reason,
        "message": message,
    }


def js(*conditions: Obj, jobs: list[Obj] | None = None) -> Obj:
    status: Obj = {"conditions": list(conditions)}
    if jobs is not None:
        status["replicatedJobsStatus"] = jobs
    return {"kind": "JobSet", "status": status}


def test_jobset_completed_becomes_complete_with_its_reason_and_time() -> None:
    status = derive_status(
        make_trainjob().obj(),
        js(cond("Completed", reason="AllJobsCompleted", message="jobset completed successfully")),
        now=NOW,
    )
    assert status["conditions"] == [
        {
            "type": "Complete",
            "status": "True",
            "lastTransitionTime": T0,
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
        }
    ]


def test_jobset_failed_is_copied_and_other_jobset_conditions_ignored() -> None:
    status = derive_status(
        make_trainjob().obj(),
        js(cond("Failed", reason="FailedJobs"), cond("StartupPolicyCompleted")),
        now=NOW,
    )
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [("Failed", "FailedJobs")]


def test_jobs_status_mirrors_replicated_jobs_status() -> None:
    jobs = [{"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}]
    status = derive_status(make_trainjob().obj(), js(jobs=jobs), now=NOW)
    assert status == {"jobsStatus": jobs}


def test_running_job_has_no_condition_so_the_sdk_shows_running() -> None:
    jobs = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    status = derive_status(make_trainjob().obj(), js(jobs=jobs), now=NOW)
    assert "conditions" not in status


def test_failed_from_jobset_is_cleared_when_the_jobset_recovers() -> None:
    job = make_trainjob().conditions(cond("Failed", reason="FailedJobs")).obj()
    assert "conditions" not in derive_status(job, js(), now=NOW)


def test_deadline_failure_is_sticky() -> None:
    job = make_trainjob().conditions(cond("Failed", reason="DeadlineExceeded")).obj()
    assert derive_status(job, None, now=NOW)["conditions"][0]["reason"] == "DeadlineExceeded"


def test_suspend_then_resume() -> None:
    suspended = derive_status(make_trainjob().suspend().obj(), js(), now=NOW)
    assert suspended["conditions"] == [
        cond("Suspended", "True", "Suspended", "TrainJob is suspended", "2026-05-01T12:00:00Z")
    ]
    later = NOW + timedelta(minutes=5)
    resumed = derive_status(
        make_trainjob().suspend(False).set("status", suspended).obj(), js(), now=later
    )
    assert resumed["conditions"] == [
        cond("Suspended", "False", "Resumed", "TrainJob is resumed", "2026-05-01T12:05:00Z")
    ]
    # Resumed again: nothing changes (no flip, so the time stays).
    again = derive_status(
        make_trainjob().set("status", resumed).obj(), js(), now=later + timedelta(hours=1)
    )
    assert again == resumed


def test_deadline_exceeded_fails_and_deletes_the_jobset() -> None:
    job = make_trainjob().deadline(60).created("2026-05-01T11:58:00Z").obj()
    update = derive(job, js(), now=NOW)
    assert update.delete_jobset
    (c,) = update.status["conditions"]
    assert (c["type"], c["reason"], c["message"]) == (
        "Failed",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )


def test_deadline_pending_requeues_for_the_remaining_time() -> None:
    job = make_trainjob().deadline(600).created("2026-05-01T11:58:00Z").obj()
    update = derive(job, js(), now=NOW)
    assert update.requeue_after == pytest.approx(480.0)
    assert not update.delete_jobset


def test_deadline_restarts_at_resume() -> None:
    resumed = cond("Suspended", "False", "Resumed", "TrainJob is resumed", "2026-05-01T11:59:30Z")
    job = make_trainjob().deadline(60).created("2026-01-01T00:00:00Z").conditions(resumed).obj()
    assert derive(job, js(), now=NOW).requeue_after == pytest.approx(30.0)


def test_deadline_is_paused_while_suspended() -> None:
    job = make_trainjob().deadline(1).created("2020-01-01T00:00:00Z").suspend().obj()
    update = derive(job, js(), now=NOW)
    assert update.requeue_after is None and not update.delete_jobset


def test_missing_jobset_keeps_the_status_of_a_finished_job() -> None:
    job = make_trainjob().conditions(cond("Complete")).obj()
    assert derive_status(job, None, now=NOW) == {"conditions": [cond("Complete")]}


def test_trainer_status_is_preserved() -> None:
    job = (
        make_trainjob()
        .set("status", {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": T0}})
        .obj()
    )
    assert derive_status(job, js(), now=NOW)["trainerStatus"]["progressPercentage"] == 40


@pytest.mark.parametrize(
    ("job", "state"),
    [
        pytest.param(make_trainjob().obj(), JobState.CREATED, id="new job is Created"),
        pytest.param(make_trainjob().suspend().obj(), JobState.SUSPENDED, id="suspended"),
        pytest.param(
            make_trainjob().set("status", {"jobsStatus": [{"name": "node", "active": 1}]}).obj(),
            JobState.RUNNING,
            id="active pods mean Running",
        ),
        pytest.param(
            make_trainjob().conditions(cond("Complete")).obj(), JobState.COMPLETE, id="Complete"
        ),
        pytest.param(
            make_trainjob().conditions(cond("Failed")).obj(), JobState.FAILED, id="Failed"
        ),
    ],
)
def test_job_state_table(job: Obj, state: JobState) -> None:
    assert job_state(job) is state
    assert state.is_terminal() == (state in (JobState.COMPLETE, JobState.FAILED))


@pytest.mark.parametrize(
    ("end", "reason"), [("Complete", "JobSetCompleted"), ("Failed", "DeadlineExceeded")]
)
def test_finding_10_suspending_a_finished_job_leaves_it_finished_alone(
    end: str, reason: str
) -> None:
    done = {"type": end, "status": "True", "reason": reason, "message": "done",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    job = make_trainjob("j").suspend().conditions(done).obj()
    status = derive(job, None, now=datetime(2026, 1, 2, tzinfo=UTC)).status
    types = {c["type"]: c["status"] for c in status.get("conditions") or []}
    assert "Suspended" not in types
    assert job_state({**job, "status": status}) == (
        JobState.COMPLETE if end == "Complete" else JobState.FAILED
    )
