"""render(): the objects upstream v2.3 applies, rule by rule (trainer v2.3.0 pkg/runtime/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from runtime_helpers import (
    TEST_ENV,
    UPSTREAM,
    by_kind,
    container,
    env_of,
    jobset,
    load_upstream_runtime,
    pod,
)

from kubetrain.runtime import Existing, FeatureGates, RenderError, render
from kubetrain.runtime.render import Plan
from kubetrain.testing import make_runtime, make_trainjob

Render = Callable[..., Plan]
RANK = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}


def torch_runtime(**job: Any) -> dict[str, Any]:
    job.setdefault("image", "pytorch")
    builder = make_runtime("torch-distributed").framework("torch").num_nodes(1).torch()
    return builder.job("node", ancestor="trainer", **job).obj()


# --- torch --------------------------------------------------------------------------------------


def test_torch_two_gpu_nodes_match_the_reference_example(checked_render: Render) -> None:
    job = make_trainjob("tj1", "u").trainer(
        num_nodes=2, resources_per_node={"limits": {"nvidia.com/gpu": 2}}
    )
    js = jobset(checked_render(job.obj(), torch_runtime()))
    rjob = js["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 1
    assert rjob["template"]["spec"]["parallelism"] == 2
    assert rjob["template"]["spec"]["completions"] == 2
    node = container(js, "node")
    assert node["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert env_of(node) == [
        ("PET_NNODES", "2"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NODE_RANK", RANK),
        ("PET_MASTER_ADDR", "tj1-node-0-0.tj1"),
        ("PET_MASTER_PORT", "29500"),
    ]
    assert node["ports"] == [{"containerPort": 29500}]
    assert js["spec"]["suspend"] is False
    assert js["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj1",
            "uid": TEST_ENV.uid_placeholder,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


@pytest.mark.parametrize(
    ("trainer", "runtime_resources", "expected"),
    [
        pytest.param({"num_proc_per_node": 3}, None, "3", id="trainJob numProcPerNode wins"),
        pytest.param({}, None, "1", id="no resources at all gives one process"),
        pytest.param(
            {"resources_per_node": {"requests": {"cpu": "500m"}}},
            None,
            "1",
            id="500m rounds up to 1",
        ),
        pytest.param(
            {"resources_per_node": {"limits": {"cpu": 6}}},
            None,
            "6",
            id="CPU-only limits give an integer",
        ),
        pytest.param(
            {"resources_per_node": {"requests": {"cpu": "0"}, "limits": {"cpu": "4"}}},
            None,
            "4",
            id="zero CPU request falls back to the limit",
        ),
        pytest.param(
            {}, {"limits": {"cpu": "3"}}, "3", id="runtime CPU counts when the TrainJob sets none"
        ),
        pytest.param(
            {"resources_per_node": {"limits": {"cpu": "2"}}},
            {"limits": {"nvidia.com/gpu": "8"}},
            "2",
            id="trainJob resources replace the runtime's for the arithmetic",
        ),
        pytest.param({}, {"limits": {"nvidia.com/gpu": "1"}}, "auto", id="GPUs keep auto"),
    ],
)
def test_torch_num_proc_per_node(
    checked_render: Render, trainer: dict[str, Any], runtime_resources: Any, expected: str
) -> None:
    rt = torch_runtime(resources=runtime_resources) if runtime_resources else torch_runtime()
    js = jobset(checked_render(make_trainjob().trainer(**trainer).obj(), rt))
    assert dict(env_of(container(js, "node")))["PET_NPROC_PER_NODE"] == expected


def test_torch_env_order_runtime_then_trainjob_then_pet(checked_render: Render) -> None:
    rt = torch_runtime(env={"RUNTIME": "r", "A": "runtime"})
    job = make_trainjob("j").trainer(env={"A": "job", "B": "b"}).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    names = [n for n, _ in env_of(node)]
    assert names == [
        "RUNTIME",
        "A",
        "B",
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert dict(env_of(node))["A"] == "job"


def test_torch_without_trainer_block_gets_no_pet_env(checked_render: Render) -> None:
    job = make_trainjob("j").obj()
    node = container(jobset(checked_render(job, torch_runtime())), "node")
    assert "env" not in node and "ports" not in node


def test_runtime_num_nodes_is_the_default_count(checked_render: Render) -> None:
    rt = make_runtime().torch().num_nodes(3).job("node", ancestor="trainer").obj()
    js = jobset(checked_render(make_trainjob().trainer().obj(), rt))
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 3
    assert dict(env_of(container(js, "node")))["PET_NNODES"] == "3"


def test_trainer_image_command_args_replace_the_runtime(checked_render: Render) -> None:
    rt = torch_runtime(command=["sleep", "1"])
    job = make_trainjob().trainer(image="img:2", command=["python"], args=["a.py"]).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    assert (node["image"], node["command"], node["args"]) == ("img:2", ["python"], ["a.py"])


def test_resources_per_node_merges_per_resource_key(checked_render: Render) -> None:
    rt = torch_runtime(
        resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}}
    )
    job = make_trainjob().trainer(resources_per_node={"limits": {"cpu": 2.0}}).obj()
    node = container(jobset(checked_render(job, rt)), "node")
    assert node["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}


def test_env_injection_targets_get_all_five_pet_vars(checked_render: Render) -> None:
    rt = (
        make_runtime()
        .torch(
            envInjection={"targets": [{"jobName": "node", "containerNames": ["sidecar", "init"]}]}
        )
        .job(
            "node",
            ancestor="trainer",
            containers=[{"name": "node", "image": "x"}, {"name": "sidecar", "image": "y"}],
            init_containers=[{"name": "init", "image": "z"}],
        )
        .obj()
    )
    js = jobset(checked_render(make_trainjob("t").trainer().obj(), rt))
    for c in (container(js, "node", "sidecar"), pod(js, "node")["initContainers"][0]):
        assert [n for n, _ in env_of(c)] == [
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
            "PET_NODE_RANK",
            "PET_MASTER_ADDR",
            "PET_MASTER_PORT",
        ]


def test_env_injection_missing_container_fails_the_reconcile() -> None:
    rt = make_runtime().torch(
        envInjection={"targets": [{"jobName": "node", "containerNames": ["nope"]}]}
    )
    rt = rt.job("node", ancestor="trainer")
    with pytest.raises(
        RenderError, match='envInjection target podSet "node" container "nope" not found'
    ):
        render(make_trainjob().trainer().obj(), rt.obj(), gates=UPSTREAM, environment=TEST_ENV)


def test_torchtune_rewrites_the_command_without_master_env(checked_render: Render) -> None:
    rt = load_upstream_runtime("llama3_2_1B")
    job = (
        make_trainjob("tune")
        .runtime("torchtune-llama3.2-1b")
        .trainer(command=["tune", "run"])
        .obj()
    )
    node = container(jobset(checked_render(job, rt)), "node")
    # Runtime GPUs 2, one node, auto -> distributed full fine-tune with a rendezvous endpoint.
    assert node["command"] == [
        "tune",
        "run",
        "--rdzv_endpoint=tune-node-0-0.tune:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert [n for n, _ in env_of(node)] == ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"]


# --- jax, xgboost, plainml ----------------------------------------------------------------------


def test_jax_env_then_trainjob_env(checked_render: Render) -> None:
    rt = make_runtime("jax-distributed").jax().num_nodes(1).job("node", ancestor="trainer").obj()
    job = make_trainjob("jx").runtime("jax-distributed").trainer(num_nodes=3, env={"X": "1"}).obj()
    js = jobset(checked_render(job, rt))
    node = container(js, "node")
    assert env_of(node) == [
        ("JAX_NUM_PROCESSES", "3"),
        ("JAX_PROCESS_ID", RANK),
        ("JAX_COORDINATOR_ADDRESS", "jx-node-0-0.jx:29500"),
        ("X", "1"),
    ]
    assert node["ports"] == [{"containerPort": 29500}]
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 3


def test_xgboost_workers_multiply_by_gpus(checked_render: Render) -> None:
    rt = (
        make_runtime("xgboost-distributed")
        .xgboost()
        .num_nodes(1)
        .job("node", ancestor="trainer")
        .obj()
    )
    job = (
        make_trainjob("xg")
        .runtime("xgboost-distributed")
        .trainer(num_nodes=2, env={"E": "e"}, resources_per_node={"limits": {"nvidia.com/gpu": 4}})
        .obj()
    )
    node = container(jobset(checked_render(job, rt)), "node")
    assert env_of(node) == [
        ("E", "e"),
        ("DMLC_TRACKER_URI", "xg-node-0-0.xg"),
        ("DMLC_TRACKER_PORT", "29500"),
        ("DMLC_TASK_ID", RANK),
        ("DMLC_NUM_WORKER", "8"),
    ]


def test_plainml_without_policy_sets_count_and_env(checked_render: Render) -> None:
    rt = make_runtime("plain").job("node", ancestor="trainer", parallelism=1).obj()
    job = make_trainjob().runtime("plain").trainer(num_nodes=4, env={"K": "v"}).obj()
    js = jobset(checked_render(job, rt))
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4
    assert env_of(container(js, "node")) == [("K", "v")]
    assert "ports" not in container(js, "node")


def test_without_ml_policy_the_trainer_count_is_parallelism(checked_render: Render) -> None:
    rt = make_runtime("plain").job("node", ancestor="trainer", parallelism=5).obj()
    js = jobset(checked_render(make_trainjob().runtime("plain").obj(), rt))
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 5


# --- initializers -------------------------------------------------------------------------------


def initializer_runtime() -> dict[str, Any]:
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    return (
        make_runtime()
        .torch()
        .job(
            "dataset-initializer",
            ancestor="dataset-initializer",
            env={"STORAGE_URI": "hf://default"},
            volume_mounts=mount,
        )
        .job("model-initializer", ancestor="model-initializer", volume_mounts=mount)
        .job("node", ancestor="trainer")
        .obj()
    )


def test_initializers_get_storage_uri_env_and_secret(checked_render: Render) -> None:
    job = (
        make_trainjob()
        .dataset("hf://tatsu-lab/alpaca", env={"A": "1"}, secret="ds")
        .model("s3://bucket/m", env=[{"name": "STORAGE_URI", "value": "s3://env-wins"}])
        .obj()
    )
    js = jobset(checked_render(job, initializer_runtime()))
    ds = container(js, "dataset-initializer", "dataset-initializer")
    assert env_of(ds) == [("STORAGE_URI", "hf://tatsu-lab/alpaca"), ("A", "1")]
    assert ds["envFrom"] == [{"secretRef": {"name": "ds"}}]
    model = container(js, "model-initializer", "model-initializer")
    assert env_of(model) == [("STORAGE_URI", "s3://env-wins")]
    assert "envFrom" not in model
    assert [j["replicas"] for j in js["spec"]["replicatedJobs"]] == [1, 1, 1]


def test_initializer_not_requested_leaves_the_runtime_default(checked_render: Render) -> None:
    js = jobset(checked_render(make_trainjob().obj(), initializer_runtime()))
    assert env_of(container(js, "dataset-initializer", "dataset-initializer")) == [
        ("STORAGE_URI", "hf://default")
    ]


# --- runtimePatches, labels ----------------------------------------------------------------------


def test_runtime_patches_merge_and_keep_runtime_order(checked_render: Render) -> None:
    rt = initializer_runtime()
    job = (
        make_trainjob()
        .patch(
            "kueue.x-k8s.io/manager",
            {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "spec": {"template": {"spec": {"nodeSelector": {"pool": "gpu"}}}}
                        },
                    },
                    {
                        "name": "dataset-initializer",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}
                                }
                            }
                        },
                    },
                ]
            },
            metadata={"labels": {"patched": "yes"}, "annotations": {"a": "1"}},
        )
        .patch("second.io/manager", metadata={"labels": {"patched": "again"}})
        .obj()
    )
    js = jobset(checked_render(job, rt))
    assert [j["name"] for j in js["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]
    assert pod(js, "node")["nodeSelector"] == {"pool": "gpu"}
    assert pod(js, "dataset-initializer")["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert js["metadata"]["labels"] == {"patched": "again"}
    assert js["metadata"]["annotations"] == {"a": "1"}


def test_runtime_template_labels_reach_the_jobset_but_trainjob_labels_do_not(
    checked_render: Render,
) -> None:
    rt = (
        make_runtime()
        .torch()
        .template_metadata(labels={"from": "runtime"})
        .job("node", ancestor="trainer")
        .obj()
    )
    job = make_trainjob().label("team", "ml").obj()
    js = jobset(checked_render(job, rt))
    assert js["metadata"]["labels"] == {"from": "runtime"}
    assert "annotations" not in js["metadata"]


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


def test_running_jobset_is_never_updated(checked_render: Render) -> None:
    existing = Existing.of(
        {"kind": "JobSet", "metadata": {"name": "job"}, "spec": {"suspend": False}}
    )
    plan = checked_render(make_trainjob().obj(), torch_runtime(), existing=existing)
    assert [o["kind"] for o in plan.objects] == ["ConfigMap"]


@pytest.mark.parametrize(
    ("job_suspend", "jobset_suspend"),
    [pytest.param(True, False, id="suspending"), pytest.param(False, True, id="resuming")],
)
def test_jobset_is_reapplied_while_suspended_or_on_resume(
    checked_render: Render, job_suspend: bool, jobset_suspend: bool
) -> None:
    existing = Existing.of(
        {"kind": "JobSet", "metadata": {"name": "job"}, "spec": {"suspend": jobset_suspend}}
    )
    plan = checked_render(
        make_trainjob().suspend(job_suspend).obj(), torch_runtime(), existing=existing
    )
    assert jobset(plan)["spec"]["suspend"] is job_suspend


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


# --- TrainJobStatus gate ------------------------------------------------------------------------


def test_trainjobstatus_gate_on_adds_env_volume_and_ca_configmap(checked_render: Render) -> None:
    plan = checked_render(
        make_trainjob("p", "ns").trainer().obj(), torch_runtime(), gates=FeatureGates()
    )
    assert [o["kind"] for o in plan.objects] == ["ConfigMap", "ConfigMap", "JobSet"]
    tls = plan.objects[1]
    assert tls["metadata"]["name"] == "p-tls-config" and tls["data"] == {"ca.crt": TEST_ENV.ca_pem}
    js = jobset(plan)
    node = container(js, "node")
    env = dict(env_of(node))
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/p/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert [n for n, _ in env_of(node)][-3:] == [
        "KUBEFLOW_TRAINER_SERVER_URL",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_SERVER_TOKEN",
    ]
    assert node["volumeMounts"] == [
        {
            "name": "kubeflow-trainer-token",
            "mountPath": "/var/run/secrets/kubeflow/trainer",
            "readOnly": True,
        }
    ]
    (vol,) = pod(js, "node")["volumes"]
    assert vol["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/p/status",
                "expirationSeconds": 3600,
                "path": "token",
            }
        },
        {"configMap": {"name": "p-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]


def test_trainjobstatus_gate_applies_even_without_a_trainer_block(checked_render: Render) -> None:
    plan = checked_render(make_trainjob().obj(), torch_runtime(), gates=FeatureGates())
    assert "KUBEFLOW_TRAINER_SERVER_URL" in dict(env_of(container(jobset(plan), "node")))


def test_trainjobstatus_without_ca_fails_like_upstream() -> None:
    from kubetrain.runtime import Environment

    with pytest.raises(RenderError, match=r"failed to find status server ca\.crt in tls secret"):
        render(
            make_trainjob().obj(),
            torch_runtime(),
            gates=FeatureGates(),
            environment=Environment(ca_pem=""),
        )


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
