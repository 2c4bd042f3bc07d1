"""The workload controllers' pure rules, as tables: what a ReplicaSet, a Deployment and the
Endpoints controller do next, and what they report."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubetrain.local.workloads.deployment import (
    deployment_status,
    matches_template,
    new_replica_set,
    read_strategy,
    rollout_targets,
)
from kubetrain.local.workloads.endpoints import service_slice, service_subsets
from kubetrain.local.workloads.pods import selector_matches, template_hash
from kubetrain.local.workloads.replicaset import deletion_order, replica_decision

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}


def pod(
    name: str,
    *,
    phase: str = "Running",
    ready: bool = True,
    node: bool = True,
    deleting: bool = False,
    created: str = "2026-01-01T11:00:00Z",
    ip: str = "10.0.0.1",
    labels: dict[str, str] | None = None,
    restarts: int = 0,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name, "namespace": "default", "uid": f"uid-{name}",
        "creationTimestamp": created, "labels": labels or {"app": "web"},
    }  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {
        "metadata": meta,
        "spec": {
            **({"nodeName": "kubetrain"} if node else {}),
            "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}],
        },
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "lastTransitionTime": "2026-01-01T11:00:00Z"},
            ],
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }  # fmt: skip


def owner(replicas: int | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE}
    if replicas is not None:
        body["replicas"] = replicas
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "default", "uid": "rs-uid", "generation": 2},
        "spec": {**body, **spec},
    }  # fmt: skip


# --- label selectors -------------------------------------------------------------------------

SELECTOR_CASES = [
    ("an empty selector selects everything", {}, {"a": "1"}, True),
    ("no selector selects nothing", None, {"a": "1"}, False),
    ("matchLabels needs every label", {"matchLabels": {"a": "1", "b": "2"}}, {"a": "1"}, False),
    ("In accepts a listed value", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
    ("NotIn refuses a listed value", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ("Exists needs the key", {"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
    ("DoesNotExist refuses the key", {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("selector", "labels", "expected"), [c[1:] for c in SELECTOR_CASES], ids=[c[0] for c in SELECTOR_CASES]
)  # fmt: skip
def test_label_selectors(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(selector, labels) is expected


# --- ReplicaSets -------------------------------------------------------------------------------

REPLICA_CASES = [
    ("too few pods: the missing ones are created", 3, [pod("a")], 2, []),
    ("replicas left out means one", None, [], 1, []),
    ("too many pods: the surplus goes", 1, [pod("a"), pod("b", ready=False)], 0, ["b"]),
    ("ended and deleting pods do not count", 2,
     [pod("a"), pod("b", phase="Failed"), pod("c", deleting=True)], 1, []),
    ("scaled to zero: every pod goes", 0, [pod("a"), pod("b")], 0, ["a", "b"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("replicas", "pods", "create", "delete"),
    [c[1:] for c in REPLICA_CASES], ids=[c[0] for c in REPLICA_CASES],
)  # fmt: skip
def test_a_replica_set_keeps_its_count(
    replicas: int | None, pods: list[dict[str, Any]], create: int, delete: list[str]
) -> None:
    rs = owner(replicas)
    decision = replica_decision(rs, rs["spec"]["selector"], pods, now=NOW)
    assert decision.create == create
    assert sorted(p["metadata"]["name"] for p in decision.delete) == delete


def test_surplus_pods_go_in_the_order_the_replica_set_controller_ranks_them() -> None:
    pods = [
        pod("old-ready", created="2026-01-01T10:00:00Z"),
        pod("new-ready", created="2026-01-01T11:00:00Z"),
        pod("restarting", restarts=3),
        pod("not-ready", ready=False),
        pod("pending", phase="Pending", ready=False),
        pod("unscheduled", phase="Pending", ready=False, node=False),
    ]
    assert [p["metadata"]["name"] for p in deletion_order(pods)] == [
        "unscheduled", "pending", "not-ready", "restarting", "new-ready", "old-ready",
    ]  # fmt: skip


def test_a_replica_set_reports_ready_and_available_pods_after_min_ready_seconds() -> None:
    rs = owner(3, minReadySeconds=7200)
    pods = [pod("a"), pod("b", ready=False), pod("c", labels={"app": "web", "x": "y"})]
    status = replica_decision(rs, rs["spec"]["selector"], pods, now=NOW).status
    # Ready since 11:00, and two hours are not over at 12:00: ready, not available.
    assert status == {
        "replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "observedGeneration": 2,
    }  # fmt: skip


# --- Deployments ---------------------------------------------------------------------------------


def deployment(replicas: int = 4, strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE,
    }  # fmt: skip
    if strategy is not None:
        spec["strategy"] = strategy
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": 3},
        "spec": spec,
    }  # fmt: skip


def rs(
    name: str, replicas: int, available: int, created: str = "2026-01-01T10:00:00Z"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created, "generation": 1},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": available,
                   "availableReplicas": available, "observedGeneration": 1},
    }  # fmt: skip


STRATEGY_CASES = [
    ("the default is 25% surge (rounded up) and 25% unavailable (rounded down)", 4, None, ("RollingUpdate", 1, 1)),
    ("percentages of 10 replicas", 10, {"rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "10%"}}, ("RollingUpdate", 5, 1)),
    ("both zero means one may be unavailable", 3, {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}, ("RollingUpdate", 0, 1)),
    ("one replica: surge 1, none unavailable", 1, None, ("RollingUpdate", 1, 0)),
    ("Recreate", 3, {"type": "Recreate"}, ("Recreate", 0, 0)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("replicas", "strategy", "expected"), [c[1:] for c in STRATEGY_CASES], ids=[c[0] for c in STRATEGY_CASES]
)  # fmt: skip
def test_the_strategy_with_its_defaults(
    replicas: int, strategy: dict[str, Any] | None, expected: tuple[str, int, int]
) -> None:
    got = read_strategy(deployment(replicas, strategy))
    assert (got.kind, got.max_surge, got.max_unavailable) == expected


ROLLOUT_CASES = [
    # (id, replicas, strategy, new (replicas, available) or None, olds [(replicas, available)], old pods, targets)
    ("a first rollout creates the ReplicaSet with every replica", 4, None, None, [], 0, {"": 4}),
    ("a new template starts a ReplicaSet within the surge", 4, None, None, [(4, 4)], 4, {"": 1}),
    ("old pods go while enough stay available", 4, None, (1, 0), [(4, 4)], 4, {"old-0": 3}),
    ("nothing goes below the minimum available", 4, None, (3, 0), [(2, 2)], 2, {}),
    ("unavailable old pods go first", 4, None, (3, 3), [(2, 0)], 2, {"old-0": 0}),
    ("the new ReplicaSet grows as old pods leave", 4, None, (2, 2), [(1, 1)], 1, {"web-new": 4}),
    ("a finished rollout changes nothing", 4, None, (4, 4), [], 0, {}),
    ("scaling down the Deployment scales the new ReplicaSet", 2, None, (4, 4), [], 0, {"web-new": 2}),
    ("Recreate scales every old ReplicaSet to zero first", 3, {"type": "Recreate"}, None, [(3, 3)], 3, {"old-0": 0}),
    ("Recreate waits until no old pod runs", 3, {"type": "Recreate"}, None, [(0, 0)], 1, {}),
    ("Recreate then starts every new pod", 3, {"type": "Recreate"}, None, [(0, 0)], 0, {"": 3}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("replicas", "strategy", "new", "olds", "old_pods", "targets"),
    [c[1:] for c in ROLLOUT_CASES], ids=[c[0] for c in ROLLOUT_CASES],
)  # fmt: skip
def test_a_rollout_step(
    replicas: int,
    strategy: dict[str, Any] | None,
    new: tuple[int, int] | None,
    olds: list[tuple[int, int]],
    old_pods: int,
    targets: dict[str, int],
) -> None:
    new_rs = rs("web-new", *new, created="2026-01-01T11:00:00Z") if new else None
    old_rss = [rs(f"old-{i}", *o) for i, o in enumerate(olds)]
    assert rollout_targets(deployment(replicas, strategy), new_rs, old_rss, old_pods) == targets


def test_the_new_replica_set_carries_the_template_hash_and_the_revision() -> None:
    d = deployment(2)
    made = new_replica_set(d, revision=3, replicas=1)
    digest = template_hash(
        {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}
    )
    assert made["metadata"]["name"] == f"web-{digest}"
    assert made["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": digest}
    assert made["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == digest
    assert made["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "d-uid"
    assert made["metadata"]["ownerReferences"][0]["controller"] is True
    # A template as a Go client writes it back (kubectl rollout undo) is the same template.
    d["spec"]["template"] = {
        "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {}}]},
    }
    assert matches_template(made, d)


def test_the_status_kubectl_rollout_status_reads() -> None:
    done = deployment_status(deployment(2), rs("web-new", 2, 2), [rs("old", 0, 0)], NOW)
    assert {k: v for k, v in done.items() if k != "conditions"} == {
        "observedGeneration": 3, "replicas": 2, "updatedReplicas": 2,
        "readyReplicas": 2, "availableReplicas": 2,
    }  # fmt: skip
    assert [(c["type"], c["status"], c["reason"]) for c in done["conditions"]] == [
        ("Available", "True", "MinimumReplicasAvailable"),
        ("Progressing", "True", "NewReplicaSetAvailable"),
    ]
    midway = deployment_status(deployment(2), rs("web-new", 1, 0), [rs("old", 2, 2)], NOW)
    assert midway["updatedReplicas"] == 1 and midway["unavailableReplicas"] == 1
    assert midway["conditions"][1]["reason"] == "ReplicaSetUpdated"


# --- Endpoints -------------------------------------------------------------------------------------


def service(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}], **spec},
    }


def test_endpoints_list_ready_pods_apart_from_the_others_on_their_named_ports() -> None:
    pods = [
        pod("a", ip="10.0.0.2"),
        pod("b", ip="10.0.0.3", ready=False),
        pod("c", ip="10.0.0.4", phase="Succeeded"),
        pod("d", ip="10.0.0.5", labels={"app": "other"}),
    ]
    (subset,) = service_subsets(service(), pods)
    assert [a["ip"] for a in subset["addresses"]] == ["10.0.0.2"]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.0.0.3"]
    assert subset["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert subset["addresses"][0]["targetRef"] == {
        "kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a",
    }  # fmt: skip
    endpoints, ports = service_slice(service(), pods)
    assert [(e["addresses"], e["conditions"]["ready"]) for e in endpoints] == [
        (["10.0.0.2"], True), (["10.0.0.3"], False),
    ]  # fmt: skip
    assert ports == [{"port": 8080, "protocol": "TCP"}]


def test_publish_not_ready_addresses_makes_every_pod_an_address() -> None:
    (subset,) = service_subsets(service(publishNotReadyAddresses=True), [pod("b", ready=False)])
    assert "notReadyAddresses" not in subset and len(subset["addresses"]) == 1


# --- batch/v1 Jobs ---------------------------------------------------------------------------------


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "uid": "job-uid"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}, **spec},
    }  # fmt: skip


def indexed(name: str, index: int, phase: str) -> dict[str, Any]:
    p = pod(name, phase=phase, ready=phase == "Running")
    p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(index)
    return p


def failed_at(name: str, finished: str) -> dict[str, Any]:
    """A pod whose container failed at ``finished``."""
    p = pod(name, phase="Failed")
    state = {"terminated": {"exitCode": 1, "finishedAt": finished}}
    p["status"]["containerStatuses"] = [{"name": "c", "restartCount": 0, "state": state}]
    return p


JOB_CASES = [
    ("a new Job starts its parallelism", {"completions": 3, "parallelism": 2}, [], 2, None),
    ("only the completions still missing start", {"completions": 3, "parallelism": 2},
     [pod("a", phase="Succeeded"), pod("b", phase="Succeeded"), pod("c")], 0, None),
    ("enough successes complete it", {"completions": 2}, [pod("a", phase="Succeeded")] * 2, 0, "Complete"),
    ("a work queue completes once a pod succeeded and none runs", {"parallelism": 2},
     [pod("a", phase="Succeeded"), pod("b", phase="Succeeded")], 0, "Complete"),
    ("a work queue starts no pod after a success", {"parallelism": 3},
     [pod("a", phase="Succeeded"), pod("b")], 0, None),
    ("failures beyond backoffLimit fail it", {"backoffLimit": 1},
     [pod("a", phase="Failed"), pod("b", phase="Failed")], 0, "Failed"),
    ("a failure within backoffLimit is replaced once the 10 s back-off has passed", {"backoffLimit": 1},
     [failed_at("a", "2026-01-01T11:59:50Z")], 1, None),
    ("a failure within backoffLimit is not replaced during the back-off", {"backoffLimit": 1},
     [failed_at("a", "2026-01-01T11:59:51Z")], 0, None),
    ("the back-off doubles with each failure", {"backoffLimit": 3},
     [failed_at("a", "2026-01-01T11:59:30Z"), failed_at("b", "2026-01-01T11:59:50Z")], 0, None),
    ("a suspended Job runs nothing", {"suspend": True}, [], 0, "Suspended"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "pods", "creates", "condition"), [c[1:] for c in JOB_CASES], ids=[c[0] for c in JOB_CASES]
)  # fmt: skip
def test_a_job_step(
    spec: dict[str, Any], pods: list[dict[str, Any]], creates: int, condition: str | None
) -> None:
    from kubetrain.local.workloads.job import job_decision

    decision = job_decision(job(**spec), pods, NOW)
    assert len(decision.create) == creates
    got = [c["type"] for c in decision.status.get("conditions") or []]
    assert (got[-1] if got else None) == condition


def test_an_indexed_job_starts_the_indexes_not_yet_done_and_reports_them() -> None:
    from kubetrain.local.workloads.job import job_decision, job_pod

    spec = {"completions": 4, "parallelism": 4, "completionMode": "Indexed"}
    pods = [indexed("a", 0, "Succeeded"), indexed("b", 1, "Running"), indexed("c", 2, "Succeeded")]
    decision = job_decision(job(**spec), pods, NOW)
    assert decision.create == [3]
    assert decision.status["completedIndexes"] == "0,2"
    assert decision.status["active"] == 2 and decision.status["succeeded"] == 2
    made = job_pod(job(**spec), 3)
    assert made["metadata"]["generateName"] == "j-3-"
    assert made["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "3"
    assert made["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"
    assert made["spec"]["hostname"] == "j-3"
    assert made["spec"]["containers"][0]["env"][-1]["name"] == "JOB_COMPLETION_INDEX"


def test_a_finished_job_is_deleted_when_its_ttl_runs_out() -> None:
    from kubetrain.local.workloads.job import job_decision

    done = job(ttlSecondsAfterFinished=60)
    done["status"] = {"completionTime": "2026-01-01T11:58:00Z", "conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T11:58:00Z"}]}  # fmt: skip
    assert job_decision(done, [pod("a", phase="Succeeded")], NOW).expired
    done["status"]["completionTime"] = "2026-01-01T11:59:30Z"
    assert job_decision(done, [pod("a", phase="Succeeded")], NOW).again == 30


# --- StatefulSets and DaemonSets -------------------------------------------------------------------


def statefulset(replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default", "uid": "sts-uid", "generation": 1},
        "spec": {"replicas": replicas, "serviceName": "db", "template": TEMPLATE, **spec},
    }  # fmt: skip


def member(ordinal: int, *, ready: bool = True, revision: str | None = None) -> dict[str, Any]:
    from kubetrain.local.workloads.statefulset import revision_of_set

    p = pod(f"db-{ordinal}", ready=ready)
    p["metadata"]["labels"]["controller-revision-hash"] = revision or revision_of_set(
        statefulset(1)
    )
    return p


STS_CASES = [
    ("OrderedReady starts ordinal 0 first", 3, {}, [], [0], []),
    ("the next ordinal waits for the one below to be Ready", 3, {}, [member(0, ready=False)], [], []),
    ("the next ordinal starts once those below are Ready", 3, {}, [member(0), member(1)], [2], []),
    ("Parallel starts every missing ordinal", 3, {"podManagementPolicy": "Parallel"}, [member(1)], [0, 2], []),
    ("scaling down removes the highest ordinal first", 1, {}, [member(0), member(1), member(2)], [], ["db-2"]),
    ("a rolling update replaces the highest stale pod", 2, {}, [member(0, revision="old"), member(1, revision="old")], [], ["db-1"]),
    ("a partition keeps the ordinals below it", 2, {"updateStrategy": {"rollingUpdate": {"partition": 2}}},
     [member(0, revision="old"), member(1, revision="old")], [], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("replicas", "spec", "pods", "create", "delete"), [c[1:] for c in STS_CASES], ids=[c[0] for c in STS_CASES]
)  # fmt: skip
def test_a_statefulset_step(
    replicas: int,
    spec: dict[str, Any],
    pods: list[dict[str, Any]],
    create: list[int],
    delete: list[str],
) -> None:
    from kubetrain.local.workloads.statefulset import statefulset_decision

    decision = statefulset_decision(statefulset(replicas, **spec), pods, NOW)
    assert decision.create == create
    assert [p["metadata"]["name"] for p in decision.delete] == delete


def test_a_statefulset_pod_is_named_under_its_service_with_its_own_claims() -> None:
    from kubetrain.local.workloads.statefulset import statefulset_pod

    claims = [{"metadata": {"name": "data"}}]
    made = statefulset_pod(statefulset(3, volumeClaimTemplates=claims), 2)
    assert made["metadata"]["name"] == "db-2"
    assert (made["spec"]["hostname"], made["spec"]["subdomain"]) == ("db-2", "db")
    assert made["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-2"
    assert made["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-2"}}
    ]


def test_a_daemonset_runs_one_pod_bound_to_each_node_it_selects() -> None:
    from kubetrain.local.workloads.daemonset import daemonset_decision, daemonset_pod

    ds = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid", "generation": 1},
        "spec": {"template": {**TEMPLATE, "spec": {"nodeSelector": {"gpu": "yes"}, "containers": []}}},
    }  # fmt: skip
    nodes = [{"metadata": {"name": "kubetrain", "labels": {"gpu": "yes"}}},
             {"metadata": {"name": "other", "labels": {}}}]  # fmt: skip
    assert daemonset_decision(ds, nodes, [], NOW).create == ["kubetrain"]
    made = daemonset_pod(ds, "kubetrain")
    assert made["spec"]["nodeName"] == "kubetrain"
    stray = pod("stray")
    stray["spec"]["nodeName"] = "other"
    decision = daemonset_decision(ds, nodes, [stray], NOW)
    assert [p["metadata"]["name"] for p in decision.delete] == ["stray"]
    assert decision.status["desiredNumberScheduled"] == 1


def test_a_rollout_that_stops_progressing_passes_its_deadline_and_says_so() -> None:
    d = deployment(2)
    d["spec"]["progressDeadlineSeconds"] = 600
    d["status"] = {"updatedReplicas": 1, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "conditions": [
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
         "lastUpdateTime": "2026-01-01T11:55:00Z", "lastTransitionTime": "2026-01-01T11:50:00Z"}]}  # fmt: skip
    new, olds = rs("web-new", 1, 0), [rs("old", 2, 2)]
    # Five minutes without progress, ten allowed: still progressing.
    cond = deployment_status(d, new, olds, NOW)["conditions"][1]
    assert (cond["status"], cond["reason"]) == ("True", "ReplicaSetUpdated")
    later = datetime(2026, 1, 1, 12, 6, 0, tzinfo=UTC)
    cond = deployment_status(d, new, olds, later)["conditions"][1]
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert cond["message"] == 'ReplicaSet "web-new" has timed out progressing.'
    # A new pod becoming available is progress: the clock starts again.
    cond = deployment_status(d, rs("web-new", 1, 1), olds, later)["conditions"][1]
    assert (cond["status"], cond["lastUpdateTime"]) == ("True", "2026-01-01T12:06:00Z")
