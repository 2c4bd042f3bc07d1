"""The daemon: started on demand, one per home, and truthful after any stop, even kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from daemon_support import command_line, sleeping, unique_sleep

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import JOBSET, POD, TRAINING_RUNTIME, TRAINJOB, Kind
from kubetrain.local.daemon import DaemonInfo, daemon_status, ensure_daemon, stop_daemon
from kubetrain.testing import make_trainjob
from polling import until

PY = sys.executable


def jobset(
    name: str, command: list[str], pods: int = 1, host_dir: Path | None = None
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "node", "image": "python", "command": command}],
    }
    if host_dir is not None:
        # The sandbox's /tmp is private: the test talks to its pods through a hostPath.
        pod_spec["volumes"] = [{"name": "ctl", "hostPath": {"path": str(host_dir)}}]
        pod_spec["containers"][0]["volumeMounts"] = [{"name": "ctl", "mountPath": "/ctl"}]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "parallelism": pods,
                            "completions": pods,
                            "backoffLimit": 0,
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ]
        },
    }


async def pods_of(api: KubeClient, name: str) -> list[dict[str, Any]]:
    items, _ = await api.list(
        POD.api_version, POD.plural, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
    )
    return sorted(items, key=lambda p: p["metadata"]["name"])


async def finished(api: KubeClient, res: Kind, name: str, types: tuple[str, ...]) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await api.get(res.api_version, res.plural, name, namespace="default")
        conds = (obj.get("status") or {}).get("conditions") or []
        return obj if any(c["type"] in types and c["status"] == "True" for c in conds) else None

    # Generous: torch jobs queue behind any other job on this machine that holds port 29500.
    result: dict[str, Any] = await until(check, 180)
    return result


async def two_sleeping_nodes(api: KubeClient, name: str) -> str:
    """A TrainJob of two nodes that sleep, once both sleep; the answer finds their processes."""
    tag = unique_sleep()
    trainjob = make_trainjob(name).trainer(num_nodes=2, command=["sleep", tag]).obj()
    await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)

    async def both() -> bool:
        return len(sleeping(tag)) == 2

    await until(both, 180)
    return tag


def kill9(info: DaemonInfo) -> None:
    os.kill(info.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while daemon_status(info.home).running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not daemon_status(info.home).running


def test_ensure_daemon_starts_one_daemon_and_reuses_it(home: Path) -> None:
    assert not daemon_status(home).running
    info = ensure_daemon(home)
    assert info.url.startswith("https://127.0.0.1:") and info.token and info.kubeconfig.is_file()
    assert ensure_daemon(home).pid == info.pid
    status = daemon_status(home)
    assert (status.running, status.ready, status.pid) == (True, True, info.pid)
    assert stop_daemon(home)
    status = daemon_status(home)
    assert not status.running and status.url is None
    assert not (home / "daemon.port").exists()
    assert stop_daemon(home) is False


def test_clients_racing_to_start_end_up_with_one_daemon(home: Path) -> None:
    found: list[int] = []

    def start() -> None:
        found.append(ensure_daemon(home).pid)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found) == 3


@pytest.mark.parametrize("how", ["kill -9", "daemon stop"])
async def test_after_a_stop_a_live_pod_is_adopted_and_recorded_once(home: Path, how: str) -> None:
    ctl = home.parent / "ctl"
    ctl.mkdir()
    # The local engine refuses hostPath volumes unless its owner allows the directory.
    home.mkdir()
    (home / "engine.yaml").write_text(f"allowedHostPaths: [{ctl}]\n")
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    # Runs until the test says go.
    script = "import os,time\nwhile not os.path.exists('/ctl/go'): time.sleep(0.05)\nprint('done')"
    try:
        await api.create(
            JOBSET.api_version,
            JOBSET.plural,
            jobset("adopt", [PY, "-c", script], pods=2, host_dir=ctl),
        )

        async def running() -> bool:
            pods = await pods_of(api, "adopt")
            return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

        await until(running, 180)
        before = {p["metadata"]["name"] for p in await pods_of(api, "adopt")}
    finally:
        await api.close()
    if how == "kill -9":
        await asyncio.to_thread(kill9, info)
    else:
        assert await asyncio.to_thread(stop_daemon, home)
    (ctl / "go").write_text("go")  # the pods finish while no daemon runs
    time.sleep(0.5)
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        done = await finished(api, JOBSET, "adopt", ("Completed", "Failed"))
        assert done["status"]["terminalState"] == "Completed"
        pods = await pods_of(api, "adopt")
        assert {p["metadata"]["name"] for p in pods} == before
        for pod in pods:
            cs = pod["status"]["containerStatuses"][0]
            assert (
                pod["status"]["phase"],
                cs["restartCount"],
                cs["state"]["terminated"]["exitCode"],
            ) == ("Succeeded", 0, 0)
            log = home / "logs" / "default" / pod["metadata"]["name"] / "node.log"
            assert log.read_text().strip() == "done"
    finally:
        await api.close()


async def test_after_kill_9_a_pod_that_died_meanwhile_is_recorded_failed(home: Path) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    tag = unique_sleep()
    try:
        await api.create(JOBSET.api_version, JOBSET.plural, jobset("lost", ["sleep", tag], pods=1))

        async def running() -> bool:
            pods = await pods_of(api, "lost")
            return len(pods) == 1 and pods[0]["status"].get("phase") == "Running"

        await until(running, 180)
        [before] = await pods_of(api, "lost")
    finally:
        await api.close()
    await asyncio.to_thread(kill9, info)
    # The workload dies while no daemon watches it.
    pids = sleeping(tag)
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        done = await finished(api, JOBSET, "lost", ("Completed", "Failed"))
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "FailedJobs"
        [pod] = await pods_of(api, "lost")
        assert pod["metadata"]["name"] == before["metadata"]["name"]  # not re-run
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert pod["status"]["phase"] == "Failed" and term["exitCode"] == 137
    finally:
        await api.close()


async def test_a_trainjob_runs_through_controller_and_executor_to_complete(home: Path) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    command = ["python", "-c", "import os; print(os.environ['PET_NODE_RANK'])"]
    trainjob = make_trainjob("tj").trainer(num_nodes=2, command=command).obj()
    try:
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        done = await finished(api, TRAINJOB, "tj", ("Complete", "Failed"))
        assert [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"] == [
            "Complete"
        ]
        pods = await pods_of(api, "tj")
        assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"]
        ranks = sorted(
            (home / "logs" / "default" / p["metadata"]["name"] / "node.log").read_text().strip()
            for p in pods
        )
        assert ranks == ["0", "1"]
    finally:
        await api.close()


# torchrun's side of the example without its training (tests/cli trains the example itself):
# every rank says where it sits, a few all-reduce steps cross both nodes, rank 0 saves a
# tensor where the example saves its model. Both ranks of a pod share its log, and containers
# run with PYTHONUNBUFFERED, where print() writes the text and its newline apart: each line
# goes out in one write so the two ranks' lines cannot interleave.
TORCHRUN_SCRIPT = """\
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
env = ("RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
sys.stdout.write("env " + " ".join(f"{name}={os.environ[name]}" for name in env) + "\\n")
where = [torch.zeros(2, dtype=torch.long) for _ in range(world)]
dist.all_gather(where, torch.tensor([int(os.environ["GROUP_RANK"]), int(os.environ["LOCAL_RANK"])]))
total = torch.zeros(1)
for step in range(1, 4):
    value = torch.tensor([float(rank + step)])
    dist.all_reduce(value)
    total += value
    if rank == 0:
        print(f"step {step} sum {value.item():g}", flush=True)
if rank == 0:
    print("ranks " + " ".join(f"{n}/{l}" for n, l in (w.tolist() for w in where)), flush=True)
    out = Path(os.environ["OUTPUT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    torch.save(total, out / "model.pt")
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.slow
async def test_torchrun_runs_the_examples_spec_as_2_nodes_x_2_processes(home: Path) -> None:
    import yaml

    example = Path(__file__).resolve().parents[2] / "examples" / "torch-ddp" / "trainjob.yaml"
    trainjob = yaml.safe_load(example.read_text())
    trainjob["metadata"]["namespace"] = "default"
    trainer = trainjob["spec"]["trainer"]
    trainer["env"] = [env for env in trainer["env"] if env["name"] != "EPOCHS"]
    trainer["command"] = [
        "bash",
        "-c",
        f"cat > /tmp/steps.py <<'PY'\n{TORCHRUN_SCRIPT}PY\nexec torchrun /tmp/steps.py\n",
    ]
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        done = await finished(api, TRAINJOB, "torch-ddp", ("Complete", "Failed"))
        assert [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"] == [
            "Complete"
        ]
        pods = await pods_of(api, "torch-ddp")
        rank0 = next(p for p in pods if p["spec"]["hostname"] == "torch-ddp-node-0-0")
        log = (home / "logs" / "default" / rank0["metadata"]["name"] / "node.log").read_text()
        lines = log.splitlines()
        # Four ranks, two per node, and torchrun's environment from the PET_* the runtime injects.
        assert "ranks 0/0 0/1 1/0 1/1" in lines, log
        env = {line for line in lines if line.startswith("env ")}
        assert env == {
            f"env RANK={r} LOCAL_RANK={r} GROUP_RANK=0 WORLD_SIZE=4 "
            "MASTER_ADDR=torch-ddp-node-0-0.torch-ddp MASTER_PORT=29500"
            for r in (0, 1)
        }, log
        # Each step's all-reduce summed every rank's value: (0+1+2+3) + 4 * step.
        assert [line for line in lines if line.startswith("step")] == [
            f"step {step} sum {6 + 4 * step}" for step in (1, 2, 3)
        ], log
        assert (home / "volumes" / "default" / "torch-ddp-output" / "model.pt").is_file()
    finally:
        await api.close()


async def test_deleting_a_trainjob_ends_every_process_within_five_seconds(home: Path) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        tag = await two_sleeping_nodes(api, "long")
        start = time.monotonic()
        await api.delete(TRAINJOB.api_version, TRAINJOB.plural, "long", namespace="default")

        # The kubelet's final delete removes each Pod once its processes have ended, so the
        # Pods go a moment after the last process: both within the five seconds.
        async def gone() -> bool:
            running = [
                p
                for p in os.listdir("/proc")
                if p.isdigit() and tag in " ".join(command_line(int(p)))
            ]
            return not running and await pods_of(api, "long") == []

        await until(gone, 5)
        assert time.monotonic() - start < 5
    finally:
        await api.close()


def crashing_runtime(name: str) -> dict[str, Any]:
    """A TrainingRuntime whose JobSet restarts at most twice and whose pods never restart."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "template": {
                "spec": {
                    "failurePolicy": {"maxRestarts": 2},
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "containers": [{"name": "node", "image": "python"}],
                                        }
                                    },
                                },
                            },
                        }
                    ],
                }
            },
        },
    }


async def test_a_crashing_trainjob_is_restarted_exactly_twice_then_fails_with_jobsets_reason(
    home: Path,
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    command = ["python", "-c", "import os, sys; sys.exit(int(os.environ['PET_NODE_RANK']) + 1)"]
    trainjob = (
        make_trainjob("crash").runtime("crashy", kind="TrainingRuntime").trainer(command=command)
    ).obj()
    try:
        await api.create(
            TRAINING_RUNTIME.api_version, TRAINING_RUNTIME.plural, crashing_runtime("crashy")
        )
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        done = await finished(api, TRAINJOB, "crash", ("Complete", "Failed"))
        failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
        assert failed["status"] == "True"
        assert failed["reason"] == "ReachedMaxRestarts"
        js = await api.get(JOBSET.api_version, JOBSET.plural, "crash", namespace="default")
        assert (js["status"]["restarts"], js["status"]["restartsCountTowardsMax"]) == (2, 2)
        pods = await pods_of(api, "crash")
        assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for p in pods} == {
            "2"
        }
    finally:
        await api.close()


async def test_suspending_a_trainjob_stops_its_pods_and_resuming_runs_them_again(
    home: Path,
) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    try:
        tag = await two_sleeping_nodes(api, "pause")

        async def two() -> bool:
            return len(sleeping(tag)) == 2

        async def none() -> bool:
            return not sleeping(tag) and not await pods_of(api, "pause")

        await api.patch(
            TRAINJOB.api_version,
            TRAINJOB.plural,
            "pause",
            {"spec": {"suspend": True}},
            namespace="default",
        )
        await until(none, 10)
        js = await api.get(JOBSET.api_version, JOBSET.plural, "pause", namespace="default")
        assert js["spec"]["suspend"] is True
        assert any(
            c["type"] == "Suspended" and c["status"] == "True" for c in js["status"]["conditions"]
        )
        await api.patch(
            TRAINJOB.api_version,
            TRAINJOB.plural,
            "pause",
            {"spec": {"suspend": False}},
            namespace="default",
        )
        await until(two, 180)
    finally:
        await api.close()


async def test_progress_reports_reach_the_trainjob_through_the_status_server(home: Path) -> None:
    info = await asyncio.to_thread(ensure_daemon, home)
    api = connect(info.kubeconfig)
    # The pod reports with the bound token the executor projects and the status server's CA and
    # address the controller rendered in: the whole TrainJobStatus path of the daemon.
    script = (
        "from kubetrain import progress\n"
        "progress.report(step=3, total_steps=3, metrics={'loss': 0.25}, force=True)\n"
        "progress.flush()\n"
    )
    trainjob = make_trainjob("prog").trainer(command=["python", "-c", script]).obj()
    try:
        await api.create(TRAINJOB.api_version, TRAINJOB.plural, trainjob)
        done = await finished(api, TRAINJOB, "prog", ("Complete", "Failed"))
        status = done["status"]
        assert [c["type"] for c in status["conditions"] if c["status"] == "True"] == ["Complete"]
        assert status["trainerStatus"]["progressPercentage"] == 100
        assert status["trainerStatus"]["metrics"] == [{"name": "loss", "value": "0.25"}]
    finally:
        await api.close()
