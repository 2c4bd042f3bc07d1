"""The pure JobSet + Job controller: what a cluster would do, step by step, without processes."""

from __future__ import annotations

from typing import Any

import pytest
from jobset_sim import Sim, make_jobset, rjob

from kubetrain.local.executor.jobset_logic import Settings, reconcile

LBL = "jobset.sigs.k8s.io/"


def test_pods_carry_the_metadata_a_cluster_gives_them() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2, labels={"app": "x"}, restart_policy=None)))
    sim.step()
    pods = sim.select("node")
    assert [p["metadata"]["name"] for p in pods] == ["tj-node-0-0-00000", "tj-node-0-1-00001"]
    meta = pods[1]["metadata"]
    labels, annotations = meta["labels"], meta["annotations"]
    assert labels["app"] == "x"
    for key, value in {
        LBL + "jobset-name": "tj",
        LBL + "replicatedjob-name": "node",
        LBL + "job-index": "0",
        LBL + "restart-attempt": "0",
        LBL + "replicatedjob-replicas": "1",
        LBL + "global-replicas": "1",
        LBL + "job-global-index": "0",
        LBL + "jobset-uid": "uid-tj",
        "batch.kubernetes.io/job-completion-index": "1",
        "batch.kubernetes.io/job-name": "tj-node-0",
        "job-name": "tj-node-0",
    }.items():
        assert labels[key] == value, key
    assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"]
    assert annotations["batch.kubernetes.io/job-completion-index"] == "1"
    assert annotations[LBL + "jobset-name"] == "tj"
    # The job-template label goes to Jobs, never to pods.
    assert "trainer.kubeflow.org/trainjob-ancestor-step" not in labels
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "tj",
            "uid": "uid-tj",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    spec = pods[1]["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("tj-node-0-1", "tj")
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["nodeName"] == "kubetrain"


@pytest.mark.parametrize(
    ("network", "subdomain"),
    [
        pytest.param(None, "tj", id="the subdomain defaults to the JobSet name"),
        pytest.param({"subdomain": "svc"}, "svc", id="network.subdomain wins"),
        pytest.param(
            {"enableDNSHostnames": False}, None, id="DNS hostnames off leaves no subdomain"
        ),
    ],
)
def test_hostname_and_subdomain(network: dict[str, Any] | None, subdomain: str | None) -> None:
    extra = {"network": network} if network else {}
    sim = Sim(make_jobset("tj", rjob("node", replicas=2), **extra))
    sim.step()
    pods = sim.select("node")
    assert [p["spec"]["hostname"] for p in pods] == ["tj-node-0-0", "tj-node-1-0"]
    assert {p["spec"].get("subdomain") for p in pods} == {subdomain}


def test_two_pods_run_and_the_jobset_completes() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2)))
    sim.step()
    assert sim.rjob_status("node") == {
        "name": "node",
        "ready": 0,
        "succeeded": 0,
        "failed": 0,
        "active": 1,
        "suspended": 0,
    }
    sim.run()
    sim.step()
    assert sim.rjob_status("node")["ready"] == 1
    sim.finish(only=0)
    sim.step()
    assert sim.true_conditions() == []
    sim.finish()
    sim.step()
    assert sim.condition("Completed") == {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    assert sim.jobset["status"]["terminalState"] == "Completed"
    assert sim.rjob_status("node")["succeeded"] == 1
    # Completed pods stay, as on a cluster, and nothing is created again.
    assert len(sim.select("node", "Succeeded")) == 2
    assert sim.step().create == []


def test_a_failing_job_without_failure_policy_fails_the_jobset() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2)))
    sim.step()
    sim.run_to_exit(exit_code=1, only=1)
    failed = sim.condition("Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: tj-node-0)",
    )
    # The failed Job's other pod is deleted; the failed pod stays for its logs.
    assert [p["metadata"]["name"] for p in sim.select()] == ["tj-node-0-1-00001"]
    assert sim.rjob_status("node")["failed"] == 1


def test_max_restarts_two_restarts_exactly_twice_then_fails() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2), failurePolicy={"maxRestarts": 2}))
    attempts = []
    for _ in range(3):
        sim.step()
        attempts.append({p["metadata"]["labels"][LBL + "restart-attempt"] for p in sim.select()})
        sim.run_to_exit(exit_code=1, only=0)
    assert attempts == [{"0"}, {"1"}, {"2"}]
    status = sim.jobset["status"]
    assert (status["restarts"], status["restartsCountTowardsMax"]) == (2, 2)
    failed = sim.condition("Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts"
    assert (
        failed["message"]
        == "jobset failed due to reaching max number of restarts (first failed job: tj-node-0)"
    )
    restarting = sim.condition("RestartingJobSet")
    assert restarting is not None and (restarting["status"], restarting["reason"]) == (
        "False",
        "JobSetFailed",
    )
    assert [r for r, _ in sim.events].count("RestartJobSetFailurePolicyAction") == 2
    assert sim.step().create == []


def test_a_restart_waits_for_the_old_pods_to_be_gone() -> None:
    sim = Sim(make_jobset("tj", rjob("node"), failurePolicy={"maxRestarts": 1}))
    sim.step()
    sim.run()
    sim.finish(exit_code=1)
    decision = reconcile(
        sim.jobset, list(sim.pods.values()), now=sim.now, suffix=sim.suffix, settings=sim.settings
    )
    assert [d.name for d in decision.delete] == ["tj-node-0-0-00000"]
    assert decision.create == []
    assert decision.status["restarts"] == 1
    # The next pass, with the old pod still terminating, must not start the new one yet.
    sim.jobset["status"] = decision.status
    old = sim.pods["tj-node-0-0-00000"]
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert (
        reconcile(sim.jobset, [old], now=sim.now, suffix=sim.suffix, settings=sim.settings).create
        == []
    )
    assert (
        len(reconcile(sim.jobset, [], now=sim.now, suffix=sim.suffix, settings=sim.settings).create)
        == 1
    )


def test_suspend_deletes_running_pods_and_resume_recreates_them() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2)))
    sim.step()
    sim.run()
    sim.step()
    sim.jobset["spec"]["suspend"] = True
    sim.step()
    assert sim.select() == []
    suspended = sim.condition("Suspended")
    assert suspended is not None
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "True",
        "SuspendedJobs",
        "jobset is suspended",
    )
    assert sim.rjob_status("node") == {
        "name": "node",
        "ready": 0,
        "succeeded": 0,
        "failed": 0,
        "active": 0,
        "suspended": 1,
    }
    sim.jobset["spec"]["suspend"] = False
    sim.step()
    assert len(sim.select("node", "Pending")) == 2
    resumed = sim.condition("Suspended")
    assert resumed is not None
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "ResumeJobs",
        "jobset is resumed",
    )
    # A suspension is no failure: the attempt does not change.
    assert {p["metadata"]["labels"][LBL + "restart-attempt"] for p in sim.select()} == {"0"}


def test_a_jobset_created_suspended_runs_nothing() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2), suspend=True))
    sim.step()
    assert sim.select() == []
    assert sim.true_conditions() == ["Suspended"]
    assert sim.rjob_status("node")["suspended"] == 1


@pytest.mark.parametrize(
    ("dep_status", "make_ready"),
    [
        pytest.param(
            "Complete",
            "finish",
            id="dependsOn Complete starts nodes after the initializer succeeds",
        ),
        pytest.param("Ready", "run", id="dependsOn Ready starts nodes once the initializer runs"),
    ],
)
def test_depends_on_orders_the_steps(dep_status: str, make_ready: str) -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("dataset-initializer"),
            rjob("node", pods=2, depends_on=[("dataset-initializer", dep_status)]),
        )
    )
    sim.step()
    assert [p["metadata"]["name"] for p in sim.select()] == ["tj-dataset-initializer-0-0-00000"]
    assert sim.rjob_status("node")["active"] == 0
    sim.run()
    sim.step()
    if make_ready == "finish":
        assert sim.select("node") == []
        sim.finish("dataset-initializer")
    sim.step()
    assert len(sim.select("node")) == 2


def test_depends_on_never_starts_nodes_after_a_failed_initializer() -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("model-initializer"),
            rjob("node", depends_on=[("model-initializer", "Complete")]),
        )
    )
    sim.step()
    sim.run_to_exit(exit_code=2)
    assert sim.select("node") == []
    assert sim.true_conditions() == ["Failed"]


@pytest.mark.parametrize(
    ("policy", "finish", "completed"),
    [
        pytest.param(
            {"operator": "Any", "targetReplicatedJobs": ["launcher"]},
            "launcher",
            True,
            id="Any: the launcher alone completes the set",
        ),
        pytest.param(
            {"operator": "Any", "targetReplicatedJobs": ["launcher"]},
            "worker",
            False,
            id="Any: a non-target success does not count",
        ),
        pytest.param(
            {"operator": "All", "targetReplicatedJobs": ["worker"]},
            "worker",
            True,
            id="All with targets: only the targets must succeed",
        ),
        pytest.param(
            {"operator": "All"}, "worker", False, id="All without targets: every Job must succeed"
        ),
    ],
)
def test_success_policy(policy: dict[str, Any], finish: str, completed: bool) -> None:
    sim = Sim(make_jobset("tj", rjob("launcher"), rjob("worker", replicas=2), successPolicy=policy))
    sim.step()
    sim.run_to_exit(finish)
    assert (sim.true_conditions() == ["Completed"]) is completed
    if completed:
        # Unfinished Jobs are deleted with their pods.
        assert sim.select(phase="Running") == []


def test_startup_policy_in_order_starts_each_step_after_the_previous_is_ready() -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("a"),
            rjob("b", replicas=2),
            rjob("c"),
            startupPolicy={"startupPolicyOrder": "InOrder"},
        )
    )
    sim.step()
    assert [p["metadata"]["labels"][LBL + "replicatedjob-name"] for p in sim.select()] == ["a"]
    assert sim.true_conditions() == ["StartupPolicyInProgress"]
    sim.run("a")
    sim.step()
    assert len(sim.select("b")) == 2 and sim.select("c") == []
    sim.run("b")
    sim.step()
    assert len(sim.select("c")) == 1
    sim.run("c")
    sim.step()
    assert sim.true_conditions() == ["StartupPolicyCompleted"]
    in_progress = sim.condition("StartupPolicyInProgress")
    assert in_progress is not None and in_progress["status"] == "False"
    completed = sim.condition("StartupPolicyCompleted")
    assert completed is not None and completed["reason"] == "InOrderStartupPolicyCompleted"


def test_never_restart_policy_replaces_failed_pods_up_to_backoff_limit() -> None:
    sim = Sim(make_jobset("tj", rjob("node", pods=2, backoff_limit=2)))
    sim.step()
    for attempt in range(2):
        sim.run_to_exit(exit_code=1, only=1)
        # A replacement with a new name but the same hostname, in the same restart attempt.
        pending = sim.select(phase="Pending")
        assert [p["spec"]["hostname"] for p in pending] == ["tj-node-0-1"], attempt
        assert sim.true_conditions() == []
    sim.run_to_exit(exit_code=1, only=1)
    failed = sim.condition("Failed")
    assert failed is not None and failed["reason"] == "FailedJobs"
    assert len(sim.select(phase="Failed")) == 3


def test_on_failure_restart_policy_counts_container_restarts_against_backoff_limit() -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("node", restart_policy="OnFailure", backoff_limit=2),
            failurePolicy={"maxRestarts": 1},
        )
    )
    sim.step()
    sim.run()
    sim.crash_in_place()
    sim.step()
    assert sim.true_conditions() == []
    sim.crash_in_place()
    sim.step()
    assert sim.jobset["status"]["restarts"] == 1
    assert sim.true_conditions() == ["RestartingJobSet"]
    assert {p["metadata"]["labels"][LBL + "restart-attempt"] for p in sim.select()} == {"1"}


def test_pod_failure_back_off_delays_the_replacement() -> None:
    sim = Sim(make_jobset("tj", rjob("node", backoff_limit=3)), Settings(pod_failure_backoff_s=10))
    sim.step()
    sim.run()
    sim.finish(exit_code=1)
    decision = sim.step()
    assert decision.create == [] and decision.requeue_after == pytest.approx(10)
    sim.tick(9)
    assert sim.step().create == []
    sim.tick(1)
    sim.step()
    assert len(sim.select(phase="Pending")) == 1


def test_parallelism_below_completions_runs_that_many_pods_at_once() -> None:
    js = make_jobset("tj", rjob("node"))
    js["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=2, completions=4)
    sim = Sim(js)
    sim.step()
    assert [p["spec"]["hostname"] for p in sim.select()] == ["tj-node-0-0", "tj-node-0-1"]
    sim.run_to_exit(only=0)
    assert sorted(p["spec"]["hostname"] for p in sim.select(phase="Pending")) == ["tj-node-0-2"]


@pytest.mark.parametrize(
    ("rules", "failing", "condition", "reason", "restarts"),
    [
        pytest.param(
            [{"name": "fatal", "action": "FailJobSet", "targetReplicatedJobs": ["launcher"]}],
            "launcher",
            "Failed",
            "FailJobSetFailurePolicyAction",
            0,
            id="FailJobSet on a target fails at once",
        ),
        pytest.param(
            [{"name": "fatal", "action": "FailJobSet", "targetReplicatedJobs": ["launcher"]}],
            "worker",
            "RestartingJobSet",
            "DefaultFailurePolicy",
            1,
            id="a non-matching rule falls back to restarting",
        ),
        pytest.param(
            [{"name": "free", "action": "RestartJobSetAndIgnoreMaxRestarts"}],
            "worker",
            "RestartingJobSet",
            "FailurePolicy_free",
            1,
            id="RestartJobSetAndIgnoreMaxRestarts names its rule",
        ),
        pytest.param(
            [{"name": "r", "action": "RestartJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
            "worker",
            "RestartingJobSet",
            "DefaultFailurePolicy",
            1,
            id="a rule for another failure reason does not match",
        ),
    ],
)
def test_failure_policy_rules(
    rules: list[dict[str, Any]], failing: str, condition: str, reason: str, restarts: int
) -> None:
    sim = Sim(
        make_jobset(
            "tj", rjob("launcher"), rjob("worker"), failurePolicy={"maxRestarts": 3, "rules": rules}
        )
    )
    sim.step()
    sim.run_to_exit(failing, exit_code=1, passes=1)
    cond = sim.condition(condition)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", reason)
    assert sim.jobset["status"].get("restarts", 0) == restarts


def test_restarts_that_ignore_max_do_not_count_towards_it() -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("node"),
            failurePolicy={
                "maxRestarts": 0,
                "rules": [{"name": "x", "action": "RestartJobSetAndIgnoreMaxRestarts"}],
            },
        )
    )
    sim.step()
    sim.run_to_exit(exit_code=1)
    assert sim.jobset["status"]["restarts"] == 1
    assert "restartsCountTowardsMax" not in sim.jobset["status"]
    assert len(sim.select(phase="Pending")) == 1


def test_a_finished_jobset_is_sticky() -> None:
    sim = Sim(make_jobset("tj", rjob("node")))
    sim.step()
    sim.run_to_exit()
    sim.pods.clear()
    decision = sim.step()
    assert decision.create == [] and sim.true_conditions() == ["Completed"]


def test_a_jobset_managed_by_another_controller_is_left_alone() -> None:
    sim = Sim(make_jobset("tj", rjob("node"), managedBy="kueue.x-k8s.io/multikueue"))
    decision = sim.step()
    assert decision.create == [] and not decision.status_changed


def test_ttl_after_finished_deletes_the_jobset() -> None:
    sim = Sim(make_jobset("tj", rjob("node"), ttlSecondsAfterFinished=30))
    sim.step()
    sim.run()
    sim.finish()
    assert sim.step().requeue_after == 30
    sim.tick(30)
    assert sim.step().delete_jobset


def test_volume_claim_policies_become_pod_volumes() -> None:
    js = make_jobset(
        "tj",
        rjob("node"),
        volumeClaimPolicies=[{"templates": [{"metadata": {"name": "ckpt"}, "spec": {}}]}],
    )
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "volumeMounts"
    ] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    sim = Sim(js)
    sim.step()
    assert sim.select()[0]["spec"]["volumes"] == [
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-tj"}}
    ]


def test_a_coordinator_is_named_on_every_pod() -> None:
    sim = Sim(
        make_jobset(
            "tj",
            rjob("driver"),
            rjob("worker", replicas=2),
            coordinator={"replicatedJob": "driver", "jobIndex": 0, "podIndex": 0},
            network={"subdomain": "svc"},
        )
    )
    sim.step()
    values = {p["metadata"]["labels"][LBL + "coordinator"] for p in sim.select()}
    assert values == {"tj-driver-0-0.svc"}
    assert {p["metadata"]["annotations"][LBL + "coordinator"] for p in sim.select()} == values


def test_a_pod_the_local_engine_refuses_fails_its_job_at_once() -> None:
    sim = Sim(make_jobset("tj", rjob("node", backoff_limit=6, restart_policy="OnFailure")))
    sim.step()
    [pod] = sim.select()
    pod["status"] = {
        "phase": "Failed",
        "reason": "UnsupportedOnLocalEngine",
        "message": "no flux here",
    }
    sim.step()
    failed = sim.condition("Failed")
    assert failed is not None and failed["reason"] == "FailedJobs"
    assert sim.select(phase="Pending") == []
