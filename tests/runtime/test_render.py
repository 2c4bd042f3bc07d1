"""render(): the objects upstream v2.3 applies, rule by rule (trainer v2.3.0 pkg/runtime/)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from runtime_helpers import (
    TEST_ENV,
    UPSTREAM,
    Render,
    by_kind,
    container,
    jobset,
    load_upstream_runtime,
    torch_runtime,
)

from kubetrain.runtime import Existing, RenderError, render
from kubetrain.testing import make_trainjob

# --- the trainer's resources -------------------------------------------------------------------


def test_resources_per_node_merges_per_resource_key(checked_render: Render) -> None:
    rt = torch_runtime(
        resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}}
    )
    job = make_trainjob().trainer(resources_per_node={"limits": {"cpu": 2.0}}).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    assert node["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}


# --- suspend, existing objects, snapshot --------------------------------------------------------


def test_suspended_trainjob_suspends_the_jobset_and_gets_the_condition(
    checked_render: Render,
) -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    plan = checked_render(make_trainjob().suspend().obj(), torch_runtime(), now=now)
    assert jobset(plan)["spec"]["suspend"] is True
    assert plan.trainjob_status == {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "reason": "Suspended",
                "message": "TrainJob is suspended",
            }
        ]
    }


def test_first_reconcile_of_a_running_job_writes_no_condition(checked_render: Render) -> None:
    assert checked_render(make_trainjob().obj(), torch_runtime()).trainjob_status == {}


def test_snapshot_holds_the_whole_runtime_and_is_created_once(checked_render: Render) -> None:
    import yaml

    rt = torch_runtime()
    job = make_trainjob("s").uid("uid-1").obj()
    plan = checked_render(job, rt)
    (snap,) = [o for o in plan.objects if o["metadata"]["name"] == "s-runtime-snapshot"]
    assert snap["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    stored = yaml.safe_load(snap["data"]["runtime"])
    assert stored["spec"] == rt["spec"] and stored["kind"] == "ClusterTrainingRuntime"
    # Second reconcile: the snapshot exists, so it is read instead of the (now changed) live runtime.
    changed = torch_runtime(image="other")
    plan2 = checked_render(job, changed, existing=Existing.of(snap))
    assert [o["kind"] for o in plan2.objects] == ["JobSet"]
    assert container(jobset(plan2), "node")["image"] == "pytorch"


def test_snapshot_is_used_even_when_the_runtime_was_deleted(checked_render: Render) -> None:
    job = make_trainjob("s").uid("u").obj()
    snap = next(o for o in checked_render(job, torch_runtime()).objects if o["kind"] == "ConfigMap")
    assert jobset(checked_render(job, None, existing=Existing.of(snap)))


@pytest.mark.parametrize(
    ("text", "document"),
    [
        pytest.param(
            "a: [1, 2.5, x, true, null]\n", {"a": [1, 2.5, "x", True, None]}, id="plain data"
        ),
        pytest.param("t: 2026-01-02\n", {"t": date(2026, 1, 2)}, id="a YAML date stays a date"),
        pytest.param("1: one\n", {1: "one"}, id="an integer key stays an integer"),
    ],
)
def test_each_read_of_a_snapshot_gets_its_own_exact_copy(text: str, document: Any) -> None:
    from kubetrain.runtime.render import parse_snapshot

    first = parse_snapshot(text)
    assert first == document and type(next(iter(first))) is type(next(iter(document)))
    first.clear()  # a caller changing its copy changes nobody else's
    assert parse_snapshot(text) == document


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda s: s["metadata"]["ownerReferences"][0].update(uid="other"),
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
            id="owned by another TrainJob",
        ),
        pytest.param(
            lambda s: s.update(data={}),
            'invalid runtime snapshot: snapshot ConfigMap missing "runtime" data key',
            id="no runtime key",
        ),
        pytest.param(
            lambda s: s["data"].update(
                runtime=s["data"]["runtime"].replace("name: torch-distributed", "name: x")
            ),
            'expecting a runtime with name, api group and kind of "torch-distributed", "<any>", "<any>" but found'
            ' runtime with name, api group and kind of "x", "trainer.kubeflow.org", "ClusterTrainingRuntime"',
            id="wrong runtime",
        ),
    ],
)
def test_invalid_snapshot_fails_the_reconcile(
    checked_render: Render, mutate: Any, message: str
) -> None:
    job = make_trainjob("s").uid("u").obj()
    snap = next(o for o in checked_render(job, torch_runtime()).objects if o["kind"] == "ConfigMap")
    mutate(snap)
    with pytest.raises(RenderError) as err:
        render(
            job, torch_runtime(), existing=Existing.of(snap), gates=UPSTREAM, environment=TEST_ENV
        )
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        pytest.param(
            "ClusterTrainingRuntime",
            'not found ClusterTrainingRuntime specified in TrainJob: clustertrainingruntimes.trainer.kubeflow.org "r" not found',
            id="cluster runtime missing",
        ),
        pytest.param(
            "TrainingRuntime",
            'TrainingRuntime specified in TrainJob is not found: trainingruntimes.trainer.kubeflow.org "r" not found',
            id="namespaced runtime missing",
        ),
    ],
)
def test_missing_runtime_without_snapshot_fails_the_reconcile(kind: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render(
            make_trainjob().runtime("r", kind=kind).obj(),
            None,
            gates=UPSTREAM,
            environment=TEST_ENV,
        )


def test_unsupported_runtime_kind_sets_failed_and_applies_nothing() -> None:
    plan = render(make_trainjob().runtime("r", kind="Other").obj(), None, gates=UPSTREAM)
    assert plan.objects == []
    (cond,) = plan.trainjob_status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "Failed",
        "True",
        "TrainingRuntimeNotSupported",
        "unsupported runtime: Other.trainer.kubeflow.org",
    )


def test_multikueue_managed_trainjob_is_skipped() -> None:
    plan = render(make_trainjob().managed_by("kueue.x-k8s.io/multikueue").obj(), torch_runtime())
    assert plan.objects == [] and plan.trainjob_status == {}


def test_finished_trainjob_applies_nothing(checked_render: Render) -> None:
    job = (
        make_trainjob()
        .conditions({"type": "Complete", "status": "True", "reason": "AllJobsCompleted"})
        .obj()
    )
    assert checked_render(job, torch_runtime()).objects == []


def test_jobset_failed_condition_does_not_stop_reapplication(checked_render: Render) -> None:
    job = (
        make_trainjob()
        .conditions({"type": "Failed", "status": "True", "reason": "FailedJobs"})
        .obj()
    )
    assert by_kind(checked_render(job, torch_runtime()), "JobSet")


# --- determinism --------------------------------------------------------------------------------


def test_same_input_same_bytes() -> None:
    from kubetrain.api.dump import dump_yaml

    rt = load_upstream_runtime("torch_distributed")
    job = (
        make_trainjob("d")
        .trainer(num_nodes=4)
        .pod_patch("a.io/b", "node", {"nodeSelector": {"x": "y"}})
        .obj()
    )
    outs = {dump_yaml(render(job, rt, environment=TEST_ENV).objects) for _ in range(3)}
    assert len(outs) == 1


def test_render_does_not_mutate_its_inputs() -> None:
    import copy

    rt = load_upstream_runtime("torch_distributed")
    job = (
        make_trainjob("d")
        .trainer(num_nodes=2, env={"A": "b"})
        .pod_patch("a.io/b", "node", {"nodeSelector": {"x": "y"}})
        .obj()
    )
    before = (copy.deepcopy(job), copy.deepcopy(rt))
    render(job, rt, environment=TEST_ENV)
    assert (job, rt) == before
