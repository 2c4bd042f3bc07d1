"""TrainJob → JobSet → status, against the real embedded API server.

The test plays the JobSet controller: it writes JobSet status as the real one (or the local
executor) would, and checks what the TrainJob controller makes of it.
"""

from __future__ import annotations

import asyncio
import base64
import copy

import pytest
from controller_plane import CONFIGMAPS, JOBSETS, TRAINJOBS, Plane, condition, eventually

from kubetrain.api.types import Obj
from kubetrain.controller import Controller, run_controller
from kubetrain.local.apiserver import ServerThread

T0 = "2026-11-29T09:00:00Z"


def jobset_condition(type_: str, reason: str, message: str) -> Obj:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


def replicated(name: str, **counts: int) -> Obj:
    base = {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    return {**base, **counts}


async def test_a_new_trainjob_gets_its_jobset_applied_by_trainer(plane: Plane) -> None:
    await plane.start_controller()
    job = await plane.create_trainjob("tj", trainer={"numNodes": 2})

    jobset = await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")

    managers = {m["manager"]: m["operation"] for m in jobset["metadata"]["managedFields"]}
    assert managers == {"trainer": "Apply"}
    assert jobset["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj",
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    node = jobset["spec"]["replicatedJobs"][0]
    assert node["template"]["spec"]["parallelism"] == 2
    snapshot = await plane.get(CONFIGMAPS, "tj-runtime-snapshot")
    assert snapshot is not None
    assert "name: torch-distributed" in snapshot["data"]["runtime"]
    assert snapshot["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]


@pytest.mark.parametrize(
    ("jobset_condition_", "expected_type"),
    [
        (
            jobset_condition("Completed", "AllJobsCompleted", "jobset completed successfully"),
            "Complete",
        ),
        (
            jobset_condition(
                "Failed", "FailedJobs", "jobset failed due to one or more job failures"
            ),
            "Failed",
        ),
        (
            jobset_condition(
                "Failed",
                "ReachedMaxRestarts",
                "jobset failed due to reaching max number of restarts",
            ),
            "Failed",
        ),
    ],
    ids=[
        "a completed JobSet completes the TrainJob with its reason and message",
        "a failed JobSet fails the TrainJob with its reason and message",
        "a JobSet out of restarts fails the TrainJob with ReachedMaxRestarts",
    ],
)
async def test_jobset_outcome_becomes_trainjob_status(
    plane: Plane, jobset_condition_: Obj, expected_type: str
) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    jobs = (
        [replicated("node", succeeded=1)]
        if expected_type == "Complete"
        else [replicated("node", failed=1)]
    )
    await plane.set_jobset_status(
        "tj", {"conditions": [jobset_condition_], "replicatedJobsStatus": jobs}
    )

    async def terminal() -> Obj | None:
        status = await plane.trainjob_status("tj")
        return status if condition(status, expected_type) else None

    status = await eventually(terminal, what=f"TrainJob {expected_type}")
    got = condition(status, expected_type)
    assert got is not None
    assert (got["status"], got["reason"], got["message"]) == (
        "True",
        jobset_condition_["reason"],
        jobset_condition_["message"],
    )
    assert status["jobsStatus"] == jobs
    reason = "Completed" if expected_type == "Complete" else got["reason"]
    events = await eventually(
        lambda: _with_reason(plane, "tj", reason), what="the transition event"
    )
    assert events[0]["type"] == ("Normal" if expected_type == "Complete" else "Warning")
    assert events[0]["firstTimestamp"] and events[0]["count"] == 1
    assert events[0]["source"]["component"] == "trainer-trainjob-controller"
    # As upstream, creating the JobSet (long done by now) recorded nothing.
    assert [e["reason"] for e in await plane.events("tj")] == [reason]


async def _with_reason(plane: Plane, name: str, reason: str) -> list[Obj]:
    return [e for e in await plane.events(name) if e["reason"] == reason]


async def test_running_jobs_status_follows_the_jobset_without_extra_conditions(
    plane: Plane,
) -> None:
    # The official SDK shows Running only while a TrainJob has no conditions at all.
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    await plane.set_jobset_status(
        "tj", {"replicatedJobsStatus": [replicated("node", active=1, ready=1)]}
    )

    async def running() -> Obj | None:
        status = await plane.trainjob_status("tj")
        return status if status.get("jobsStatus") else None

    status = await eventually(running, what="jobsStatus")
    assert status["jobsStatus"] == [replicated("node", active=1, ready=1)]
    assert not status.get("conditions")


async def test_suspend_then_resume(plane: Plane) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj", suspend=True)

    async def suspended_jobset() -> Obj | None:
        js = await plane.get(JOBSETS, "tj")
        return js if js and js["spec"].get("suspend") is True else None

    await eventually(suspended_jobset, what="a suspended JobSet")

    async def suspended_condition() -> Obj | None:
        return condition(await plane.trainjob_status("tj"), "Suspended")

    cond = await eventually(suspended_condition, what="Suspended=True")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Suspended",
        "TrainJob is suspended",
    )

    await plane.patch_trainjob("tj", {"spec": {"suspend": False}})

    async def resumed_jobset() -> Obj | None:
        js = await plane.get(JOBSETS, "tj")
        return js if js and js["spec"].get("suspend") is False else None

    await eventually(resumed_jobset, what="the JobSet resumed")

    async def resumed() -> Obj | None:
        c = condition(await plane.trainjob_status("tj"), "Suspended")
        return c if c and c["status"] == "False" else None

    cond = await eventually(resumed, what="Suspended=False/Resumed")
    assert (cond["reason"], cond["message"]) == ("Resumed", "TrainJob is resumed")

    # Events are recorded in the background, after the status write (as client-go's recorder).
    async def both_events() -> set[str] | None:
        reasons = {e["reason"] for e in await plane.events("tj")}
        return reasons if {"Suspended", "Resumed"} <= reasons else None

    await eventually(both_events, what="the Suspended and Resumed events")


async def test_a_running_jobset_is_never_mutated(plane: Plane) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    jobset = await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    # Anything that triggers reconciles (a label on the TrainJob) must leave the JobSet alone.
    await plane.patch_trainjob("tj", {"metadata": {"labels": {"poke": "1"}}})
    await plane.set_jobset_status("tj", {"replicatedJobsStatus": [replicated("node", active=1)]})
    await eventually(lambda: _jobs_status(plane, "tj"), what="status to follow the JobSet")
    after = await plane.get(JOBSETS, "tj")
    assert after is not None
    assert after["metadata"]["generation"] == jobset["metadata"]["generation"]
    assert after["spec"] == jobset["spec"]


async def _jobs_status(plane: Plane, name: str) -> list[Obj] | None:
    jobs: list[Obj] | None = (await plane.trainjob_status(name)).get("jobsStatus")
    return jobs


async def test_active_deadline_fails_the_job_and_deletes_the_jobset(plane: Plane) -> None:
    await plane.start_controller()
    # Created suspended, so the JobSet exists before the deadline counts: a deadline that has
    # already passed at the first reconcile never gets a JobSet, and creationTimestamp has whole
    # seconds, so "create, then see the JobSet within 1 s" raced the controller.
    await plane.create_trainjob("tj", activeDeadlineSeconds=1, suspend=True)
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    await plane.patch_trainjob("tj", {"spec": {"suspend": False}})

    async def failed() -> Obj | None:
        return condition(await plane.trainjob_status("tj"), "Failed")

    cond = await eventually(failed, timeout=5, what="Failed/DeadlineExceeded")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )

    async def jobset_gone() -> bool:
        return await plane.get(JOBSETS, "tj") is None

    await eventually(jobset_gone, what="the JobSet deleted")
    # Events are recorded in the background: the deletion can be seen before its Event.
    await eventually(lambda: _with_reason(plane, "tj", "DeadlineExceeded"), what="the Event")
    await asyncio.sleep(0.5)
    assert await plane.get(JOBSETS, "tj") is None, "a deadline-failed job must not come back"


@pytest.mark.parametrize(
    "outcome",
    [
        jobset_condition("Completed", "AllJobsCompleted", "jobset completed successfully"),
        jobset_condition("Failed", "FailedJobs", "jobset failed due to one or more job failures"),
    ],
    ids=[
        "deleting a completed job's JobSet does not run it again",
        "deleting a failed job's JobSet does not run it again",
    ],
)
async def test_finished_jobs_are_never_rerun(plane: Plane, outcome: Obj) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    await plane.set_jobset_status("tj", {"conditions": [outcome]})
    tj_type = "Complete" if outcome["type"] == "Completed" else "Failed"

    async def finished() -> Obj | None:
        return condition(await plane.trainjob_status("tj"), tj_type)

    before = await eventually(finished, what="the terminal condition")
    await plane.kube.delete(*JOBSETS, "tj", namespace=plane.namespace)
    # Poke the job so it is certainly reconciled after the deletion.
    await plane.patch_trainjob("tj", {"metadata": {"labels": {"poke": "1"}}})
    await asyncio.sleep(1.0)
    assert await plane.get(JOBSETS, "tj") is None
    after = condition(await plane.trainjob_status("tj"), tj_type)
    assert after == before


async def test_a_missing_runtime_fails_the_job_visibly(plane: Plane) -> None:
    await plane.start_controller()
    await plane.kube.create(
        *TRAINJOBS,
        plane.trainjob("tj", runtimeRef={"name": "no-such-runtime", "kind": "TrainingRuntime"}),
    )

    async def failed() -> Obj | None:
        return condition(await plane.trainjob_status("tj"), "Failed")

    cond = await eventually(failed, timeout=5, what="Failed/TrainingRuntimeNotFound")
    assert cond["status"] == "True"
    assert cond["reason"] == "TrainingRuntimeNotFound"
    assert "TrainingRuntime specified in TrainJob is not found" in cond["message"]
    assert cond["lastTransitionTime"], "the official SDK needs lastTransitionTime"
    assert await plane.get(JOBSETS, "tj") is None
    warnings = await eventually(
        lambda: _with_reason(plane, "tj", "TrainingRuntimeNotFound"), what="a Warning event"
    )
    assert warnings[0]["type"] == "Warning"
    assert warnings[0]["message"] == cond["message"]


async def test_a_runtime_created_within_the_grace_period_is_used(
    plane: Plane, torch_runtime: Obj
) -> None:
    await plane.start_controller(runtime_grace=5.0)
    await plane.kube.create(
        *TRAINJOBS, plane.trainjob("tj", runtimeRef={"name": "late", "kind": "TrainingRuntime"})
    )
    await asyncio.sleep(0.3)
    runtime = {
        **torch_runtime,
        "kind": "TrainingRuntime",
        "metadata": {**torch_runtime["metadata"], "name": "late", "namespace": plane.namespace},
    }
    await plane.kube.create("trainer.kubeflow.org/v1alpha1", "trainingruntimes", runtime)
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    assert condition(await plane.trainjob_status("tj"), "Failed") is None


async def test_a_job_managed_by_another_controller_is_left_alone(plane: Plane) -> None:
    await plane.start_controller()
    await plane.create_trainjob("mk", managedBy="kueue.x-k8s.io/multikueue")
    await plane.create_trainjob("ours")
    await eventually(lambda: plane.get(JOBSETS, "ours"), what="our JobSet")
    await asyncio.sleep(0.3)
    assert await plane.get(JOBSETS, "mk") is None
    assert not (await plane.trainjob_status("mk"))


async def test_status_writes_keep_the_trainer_status_of_the_status_server(plane: Plane) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    progress = {"progressPercentage": 40, "lastUpdatedTime": T0}
    await plane.kube.patch(
        *TRAINJOBS,
        "tj",
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": {"name": "tj", "namespace": plane.namespace},
         "status": {"trainerStatus": progress}},
        namespace=plane.namespace,
        patch_type="apply",
        subresource="status",
        field_manager="trainer-status",
        force=True,
    )  # fmt: skip
    await plane.set_jobset_status(
        "tj",
        {"conditions": [jobset_condition("Completed", "AllJobsCompleted", "done")]},
    )

    async def complete() -> Obj | None:
        status = await plane.trainjob_status("tj")
        return status if condition(status, "Complete") else None

    status = await eventually(complete, what="Complete")
    assert status["trainerStatus"] == progress


async def test_a_plan_that_cannot_render_fails_the_job_visibly(plane: Plane) -> None:
    await plane.spoil_snapshot("tj")
    await plane.start_controller()
    await plane.create_trainjob("tj")

    async def failed() -> Obj | None:
        return condition(await plane.trainjob_status("tj"), "Failed")

    cond = await eventually(failed, what="Failed/TrainJobResourcesCreationFailed")
    assert cond["reason"] == "TrainJobResourcesCreationFailed"
    assert "invalid runtime snapshot" in cond["message"]
    assert await plane.get(JOBSETS, "tj") is None
    await eventually(
        lambda: _with_reason(plane, "tj", "TrainJobResourcesCreationFailed"), what="the Event"
    )


async def test_run_controller_takes_a_kubeconfig_document(
    plane: Plane, server_thread: ServerThread
) -> None:
    assert server_thread.server is not None
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_controller(
            server_thread.server.kubeconfig(), namespace=plane.namespace, stop_event=stop
        )
    )
    try:
        await plane.create_trainjob("tj")
        await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def test_a_status_that_empties_is_removed_not_rejected(plane: Plane) -> None:
    # The CRD wants at least one property in status; jobsStatus vanishing must not wedge the job.
    controller = await plane.start_controller()
    await plane.create_trainjob("tj")
    await eventually(lambda: plane.get(JOBSETS, "tj"), what="the JobSet")
    await plane.set_jobset_status("tj", {"replicatedJobsStatus": [replicated("node", active=1)]})
    await eventually(lambda: _jobs_status(plane, "tj"), what="jobsStatus")
    await plane.set_jobset_status("tj", {"replicatedJobsStatus": None})

    async def emptied() -> bool:
        job = await plane.get(TRAINJOBS, "tj")
        return job is not None and not job.get("status")

    await eventually(emptied, what="the status removed")
    await asyncio.sleep(0.2)
    assert controller.metrics.total("TrainJob", "error") == 0


async def test_a_recreated_trainjob_waits_for_the_old_jobset_instead_of_adopting_it(
    plane: Plane,
) -> None:
    await plane.start_controller()
    await plane.create_trainjob("tj")
    old = await eventually(lambda: plane.get(JOBSETS, "tj"), what="the first JobSet")
    await plane.set_jobset_status(
        "tj", {"conditions": [jobset_condition("Completed", "AllJobsCompleted", "done")]}
    )
    # A finalizer keeps the old JobSet around after its TrainJob is gone, as a slow garbage
    # collector or another controller's finalizer would.
    await plane.kube.patch(
        *JOBSETS,
        "tj",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        namespace=plane.namespace,
    )
    await plane.kube.delete(*TRAINJOBS, "tj", namespace=plane.namespace)
    new = await plane.create_trainjob("tj")
    await asyncio.sleep(0.5)
    assert not (await plane.trainjob_status("tj")).get("conditions"), (
        "the old JobSet's Completed must not leak into the new TrainJob"
    )
    await plane.kube.patch(
        *JOBSETS, "tj", {"metadata": {"finalizers": None}}, namespace=plane.namespace
    )

    async def fresh() -> Obj | None:
        js = await plane.get(JOBSETS, "tj")
        return js if js and js["metadata"]["uid"] != old["metadata"]["uid"] else None

    jobset = await eventually(fresh, what="a JobSet of the new TrainJob")
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"]


async def _deepspeed_runtime(plane: Plane) -> None:
    from kubetrain.runtime.defaults import default_runtimes

    (runtime,) = copy.deepcopy(
        [r for r in default_runtimes() if r["metadata"]["name"] == "deepspeed-distributed"]
    )
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {**runtime["metadata"], "namespace": plane.namespace}
    await plane.kube.create("trainer.kubeflow.org/v1alpha1", "trainingruntimes", runtime)


async def _start_mpi_job(plane: Plane) -> Controller:
    """A controller, and the TrainJob ``mpi`` on two DeepSpeed nodes with its JobSet."""
    await _deepspeed_runtime(plane)
    controller = await plane.start_controller()
    await plane.create_trainjob(
        "mpi",
        runtimeRef={"name": "deepspeed-distributed", "kind": "TrainingRuntime"},
        trainer={"numNodes": 2},
    )
    await eventually(lambda: plane.get(JOBSETS, "mpi"), what="the JobSet")
    return controller


async def test_what_a_jobset_mounts_is_written_before_the_jobset(plane: Plane) -> None:
    # resourceVersions order every write: the Secret and both ConfigMaps must all have been
    # written before the JobSet, so its pods never start before what they mount.
    await _start_mpi_job(plane)
    jobset = await plane.get(JOBSETS, "mpi")
    mounted = [
        await plane.get(("v1", "secrets"), "mpi-mpi-ssh-auth"),
        await plane.get(CONFIGMAPS, "mpi-mpi-hostfile"),
        await plane.get(CONFIGMAPS, "mpi-runtime-snapshot"),
    ]
    assert jobset is not None and all(obj is not None for obj in mounted)
    written = [int(obj["metadata"]["resourceVersion"]) for obj in mounted if obj is not None]
    assert max(written) < int(jobset["metadata"]["resourceVersion"])


async def test_an_mpi_job_gets_its_ssh_secret_once_and_keeps_it(plane: Plane) -> None:
    controller = await _start_mpi_job(plane)
    secret = await eventually(
        lambda: plane.get(("v1", "secrets"), "mpi-mpi-ssh-auth"), what="the Secret"
    )
    assert "BEGIN EC PRIVATE KEY" in base64.b64decode(secret["data"]["ssh-privatekey"]).decode()
    assert await plane.get(CONFIGMAPS, "mpi-mpi-hostfile") is not None
    # More reconciles (a label poke, JobSet status) must neither re-key nor fail.
    await plane.patch_trainjob("mpi", {"metadata": {"labels": {"poke": "1"}}})
    await plane.set_jobset_status("mpi", {"replicatedJobsStatus": [replicated("node", active=2)]})
    await eventually(lambda: _jobs_status(plane, "mpi"), what="jobsStatus")
    again = await plane.get(("v1", "secrets"), "mpi-mpi-ssh-auth")
    assert again is not None and again["data"] == secret["data"]
    assert controller.metrics.total("TrainJob", "error") == 0


async def test_a_child_changed_by_another_manager_is_applied_again_while_the_jobset_runs(
    plane: Plane,
) -> None:
    # Unchanged children are not applied again (the controller remembers what it applied); a
    # child that is no longer as the controller applied it must still be restored.
    controller = await _start_mpi_job(plane)
    hostfile = await eventually(lambda: plane.get(CONFIGMAPS, "mpi-mpi-hostfile"), what="hostfile")

    async def jobs_status_is(**counts: int) -> bool:
        return await _jobs_status(plane, "mpi") == [replicated("node", **counts)]

    for active in (1, 2):
        await plane.set_jobset_status(
            "mpi", {"replicatedJobsStatus": [replicated("node", active=active)]}
        )
        await eventually(lambda n=active: jobs_status_is(active=n), what=f"{active} active")
    (key,) = hostfile["data"]
    await plane.kube.patch(
        *CONFIGMAPS, "mpi-mpi-hostfile", {"data": {key: "spoiled"}}, namespace=plane.namespace
    )

    async def restored() -> bool:
        live = await plane.get(CONFIGMAPS, "mpi-mpi-hostfile")
        return live is not None and live["data"] == hostfile["data"]

    await eventually(restored, what="the hostfile applied again")
    await plane.set_jobset_status(
        "mpi", {"replicatedJobsStatus": [replicated("node", active=2, ready=2)]}
    )
    await eventually(lambda: jobs_status_is(active=2, ready=2), what="2 ready")
    assert await restored()
    assert controller.metrics.total("TrainJob", "error") == 0
