"""The env shim: every rendered v2 pod of a converted job sees the values v1 gave that rank.

The v1 side of each table is v1's contract (reference §2.1-§2.5, §2.8) with v1's pod names
(``J-master-0``, ``J-worker-<i>``) replaced by the v2 pods that play their part
(``J-node-0-<rank>.J``; TF keeps one job per role: ``J-<role>-0-<i>.J``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from migrate_helpers import container, pods

from kubetrain.migrate import Category, convert
from kubetrain.migrate.admit import find_runtime

INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def v1(
    kind: str,
    specs: str,
    roles: dict[str, int],
    extra: str = "",
    main: str = "",
    cmd: str = "[python, train.py]",
) -> dict[str, Any]:
    name = {"PyTorchJob": "pytorch", "XGBoostJob": "xgboost", "JAXJob": "jax", "PaddleJob": "paddle", "TFJob": "tensorflow"}[kind]  # fmt: skip
    role_yaml = "".join(
        f"    {role}:\n      replicas: {n}\n      restartPolicy: OnFailure\n      template:\n        spec:\n"
        f"          containers:\n          - name: {name}\n            image: python\n            command: {cmd}\n{main}"
        for role, n in roles.items()
    )
    doc: dict[str, Any] = yaml.safe_load(
        f"apiVersion: kubeflow.org/v1\nkind: {kind}\nmetadata: {{name: j}}\nspec:\n{extra}  {specs}:\n{role_yaml}"
    )
    return doc


def resolved(c: dict[str, Any], index: int) -> dict[str, str]:
    """The container's env as the kubelet resolves it for the pod with this completion index."""
    out: dict[str, str] = {}
    for e in c.get("env") or []:
        if "value" in e:
            value = re.sub(r"\$\((\w+)\)", lambda m: out.get(m.group(1), m.group(0)), e["value"])
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == INDEX:
            value = str(index)
        else:
            continue
        out[e["name"]] = value
    return out


def rendered(job: dict[str, Any], **kw: Any) -> tuple[Any, dict[str, Any]]:
    c = convert(job, **kw)
    runtime = find_runtime(c.trainjob, [c.runtime] if c.runtime else [])
    assert runtime is not None
    return c, pods(c.trainjob, runtime)


def test_pytorch_without_torchrun_gets_v1s_master_world_size_and_rank() -> None:
    job = v1(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        {"Master": 1, "Worker": 2},
        extra='  nprocPerNode: "2"\n',
    )
    c, by_job = rendered(job)
    node = container(by_job["node"])
    for rank in range(3):  # v1: Master RANK 0, Worker i RANK i+1; WORLD_SIZE = replicas x nproc
        env = resolved(node, rank)
        assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED")} == {
            "MASTER_ADDR": "j-node-0-0.j", "MASTER_PORT": "29500", "WORLD_SIZE": "6", "RANK": str(rank),
            "PYTHONUNBUFFERED": "1",
        }  # fmt: skip
        assert env["PET_NPROC_PER_NODE"] == "2"  # the runtime's own contract is still there
    assert c.trainjob["spec"]["trainer"]["numProcPerNode"] == 2


def test_pytorch_with_torchrun_needs_no_shim() -> None:
    job = v1(
        "PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 1}, cmd="[torchrun, train.py]"
    )
    c, by_job = rendered(job)
    env = resolved(container(by_job["node"]), 1)
    assert "WORLD_SIZE" not in env and "MASTER_ADDR" not in env
    assert (env["PET_NODE_RANK"], env["PET_NNODES"]) == ("1", "2")
    assert c.report == []


def test_xgboost_gets_v1s_master_and_worker_addresses_on_its_own_port() -> None:
    port = "            ports: [{name: xgboostjob-port, containerPort: 9991}]\n"
    job = v1("XGBoostJob", "xgbReplicaSpecs", {"Master": 1, "Worker": 2}, main=port)
    _, by_job = rendered(job)
    for rank in range(3):
        env = resolved(container(by_job["node"]), rank)
        assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "WORKER_ADDRS", "WORKER_PORT")} == {
            "MASTER_ADDR": "j-node-0-0.j", "MASTER_PORT": "9991", "WORLD_SIZE": "3", "RANK": str(rank),
            "WORKER_ADDRS": "j-node-0-1.j,j-node-0-2.j", "WORKER_PORT": "9991",
        }  # fmt: skip


def test_jax_gets_v1s_coordinator_and_process_id() -> None:
    _, by_job = rendered(v1("JAXJob", "jaxReplicaSpecs", {"Worker": 3}))
    for i in range(3):
        env = resolved(container(by_job["node"]), i)
        assert {k: env[k] for k in ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID")} == {
            "COORDINATOR_ADDRESS": "j-node-0-0.j", "COORDINATOR_PORT": "29500", "NUM_PROCESSES": "3",
            "PROCESS_ID": str(i),
        }  # fmt: skip


def test_collective_paddle_gets_v1s_master_and_node_count() -> None:
    port = "            ports: [{name: master, containerPort: 37777}]\n"
    _, by_job = rendered(v1("PaddleJob", "paddleReplicaSpecs", {"Worker": 2}, main=port))
    env = resolved(container(by_job["node"]), 1)
    assert {k: env[k] for k in ("PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID")} == {
        "PADDLE_MASTER": "j-node-0-0.j:37777", "PADDLE_NNODES": "2", "PADDLE_JOB_ID": "j",
    }  # fmt: skip


def test_tfjob_roles_get_v1s_tf_config_cluster_and_task() -> None:
    job = v1("TFJob", "tfReplicaSpecs", {"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1})
    c, by_job = rendered(job)
    cluster = {
        "chief": ["j-chief-0-0.j:2222"], "ps": ["j-ps-0-0.j:2222"],
        "worker": ["j-node-0-0.j:2222", "j-node-0-1.j:2222"], "evaluator": ["j-evaluator-0-0.j:2222"],
    }  # fmt: skip
    # The workers' job is the trainer job, named node like every runtime's (container node too).
    jobs = {"chief": "chief", "ps": "ps", "worker": "node", "evaluator": "evaluator"}
    for role, count in (("chief", 1), ("ps", 1), ("worker", 2), ("evaluator", 1)):
        name = "node" if role == "worker" else "tensorflow"
        for i in range(count):
            config = json.loads(resolved(container(by_job[jobs[role]], name), i)["TF_CONFIG"])
            assert config == {
                "cluster": cluster,
                "task": {"type": role, "index": i},
                "environment": "cloud",
            }
    spec = c.runtime["spec"]["template"]["spec"]  # type: ignore[index]
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief"]}


def test_a_single_replica_tfjob_gets_no_tf_config_as_in_v1() -> None:
    _, by_job = rendered(v1("TFJob", "tfReplicaSpecs", {"Worker": 1}))
    assert "TF_CONFIG" not in resolved(container(by_job["node"]), 0)


@pytest.mark.parametrize(
    ("kind", "specs", "roles"),
    [
        ("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 1}),
        ("JAXJob", "jaxReplicaSpecs", {"Worker": 2}),
        ("TFJob", "tfReplicaSpecs", {"Worker": 2}),
    ],
    ids=["pytorch", "jax", "tensorflow"],
)
def test_without_the_shim_the_env_contract_is_reported_for_the_user_to_act_on(
    kind: str, specs: str, roles: dict[str, int]
) -> None:
    c, by_job = rendered(v1(kind, specs, roles), env_shim=False)
    env = resolved(container(next(iter(by_job.values()))), 0)
    assert not {"WORLD_SIZE", "NUM_PROCESSES", "TF_CONFIG"} & set(env)
    manual = [i for i in c.report if i.category == Category.MANUAL]
    assert len(manual) == 1 and manual[0].path.endswith("containers[0].env")
    assert "--env-shim" in manual[0].action


def test_runtime_reserved_and_v1_overwritten_env_is_dropped_and_reported() -> None:
    env = "            env: [{name: PET_NPROC_PER_NODE, value: '8'}, {name: RANK, value: '5'}, {name: KEEP, value: x}]\n"
    c = convert(v1("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 1}, main=env))
    names = [e["name"] for e in c.trainjob["spec"]["trainer"]["env"]]
    assert "PET_NPROC_PER_NODE" not in names and names.count("RANK") == 1 and "KEEP" in names
    dropped = {i.path for i in c.report if i.category == Category.DROPPED}
    base = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"
    assert {f"{base}.env[0]", f"{base}.env[1]"} <= dropped


def test_ps_mode_paddle_gets_a_job_per_role_and_its_workers_decide_success() -> None:
    job = v1("PaddleJob", "paddleReplicaSpecs", {"Master": 1, "Worker": 2})
    c, by_job = rendered(job)
    master, worker = (
        resolved(container(by_job["master"], "paddle"), 0),
        resolved(container(by_job["node"]), 1),
    )
    for env in (master, worker):
        assert (env["PADDLE_MASTER"], env["PADDLE_NNODES"]) == ("j-master-0-0.j:36543", "3")
    assert (master.get("PADDLE_SERVER_NUM"), worker.get("PADDLE_TRAINER_NUM")) == ("1", "1")
    spec = c.runtime["spec"]["template"]["spec"]  # type: ignore[index]
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["node"]}


@pytest.mark.parametrize(
    ("policy", "runtime", "pod_policy", "fails_on_exit_codes"),
    [
        ("OnFailure", "torch-distributed", "OnFailure", False),
        ("Always", "torch-distributed", "OnFailure", False),
        ("Never", "j-runtime", "Never", False),
        ("ExitCode", "j-runtime", "Never", True),
    ],
    ids=["OnFailure fits the default runtime", "Always restarts OnFailure",
         "Never needs a generated runtime", "ExitCode fails the Job on exit codes 1-127"],
)  # fmt: skip
def test_v1_restart_policies(
    policy: str, runtime: str, pod_policy: str, fails_on_exit_codes: bool
) -> None:
    job = v1(
        "PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 1}, cmd="[torchrun, t.py]"
    )
    for r in job["spec"]["pytorchReplicaSpecs"].values():
        r["restartPolicy"] = policy
    c, by_job = rendered(job)
    assert c.runtime_name == runtime
    assert by_job["node"]["spec"].get("restartPolicy", "OnFailure") == pod_policy
    js_job = (
        (c.runtime or {})
        .get("spec", {})
        .get("template", {})
        .get("spec", {})
        .get("replicatedJobs", [{}])[0]
    )
    rules = js_job.get("template", {}).get("spec", {}).get("podFailurePolicy", {}).get("rules", [])
    assert bool(rules) == fails_on_exit_codes
    if rules:
        assert rules[0]["action"] == "FailJob" and rules[0]["onExitCodes"]["values"] == list(
            range(1, 128)
        )
