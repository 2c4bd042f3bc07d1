"""The executor on the embedded API server, with real sandboxed processes."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from plane_helpers import PY, Plane, make_jobset, marker, processes_with, replicated_job

from kubetrain.kube.client import connect
from kubetrain.kube.kinds import JOBSET, POD

LBL = "jobset.sigs.k8s.io/"

# TODO(apiserver): drop once the server passes shutdown_timeout to its AppRunner.
pytestmark = pytest.mark.filterwarnings("ignore:shutdown_timeout should be set:DeprecationWarning")


async def test_a_two_pod_jobset_completes_and_looks_as_on_a_cluster(plane: Plane) -> None:
    # Pod 1 reaches pod 0 by its DNS name, over pod 0's own loopback address. Pods share the
    # host's port space (no network namespace), so the test takes a port nobody listens on.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = (
        "import os, socket, time\n"
        "idx = os.environ['JOB_COMPLETION_INDEX']\n"
        "if idx == '0':\n"
        "    s = socket.socket(); s.bind((socket.gethostbyname(socket.gethostname()), PORT)); s.listen()\n"
        "    c, addr = s.accept(); print('got', c.recv(100).decode(), 'from', addr[0])\n"
        "else:\n"
        "    for _ in range(400):\n"
        "        try:\n"
        "            c = socket.create_connection(('js-node-0-0.js', PORT)); break\n"
        "        except OSError: time.sleep(0.05)\n"
        "    c.sendall(socket.gethostname().encode()); print('sent')\n"
    ).replace("PORT", str(port))
    js = make_jobset("js", [PY, "-c", script])
    container = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    container["env"] = [
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                }
            },
        }
    ]
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    done = await plane.terminal("js")
    status = done["status"]
    logs = {p.parent.name: p.read_text() for p in (plane.home / "logs").rglob("*.log")}
    assert status["terminalState"] == "Completed", logs
    assert status["replicatedJobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    completed = next(c for c in status["conditions"] if c["type"] == "Completed")
    assert (completed["reason"], completed["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )

    pods = await plane.pods("js")
    assert [p["spec"]["hostname"] for p in pods] == ["js-node-0-0", "js-node-0-1"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"]
    ips = [p["status"]["podIP"] for p in pods]
    # Own addresses on the engine's pod network where it exists, else own loopback addresses.
    prefix = "10.88." if plane.executor.kubelet.network is not None else "127."
    assert len(set(ips)) == 2 and all(ip.startswith(prefix) for ip in ips)
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels[LBL + "jobset-name"] == "js" and labels[LBL + "replicatedjob-name"] == "node"
        assert labels["batch.kubernetes.io/job-completion-index"] == pod["spec"]["hostname"][-1]
        cs = pod["status"]["containerStatuses"][0]
        assert cs["state"]["terminated"]["exitCode"] == 0 and cs["restartCount"] == 0
        assert pod["status"]["startTime"]
    log0 = (plane.home / "logs" / "default" / pods[0]["metadata"]["name"] / "node.log").read_text()
    assert "got js-node-0-1 from" in log0

    # The JobSet's event is recorded right after its terminal status; give it a moment to land.
    wanted = {("Pod", "Scheduled"), ("Pod", "Started"), ("JobSet", "AllJobsCompleted")}
    for _ in range(50):
        events = await plane.events()
        reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in events}
        if wanted <= reasons:
            break
        await asyncio.sleep(0.1)
    assert wanted <= reasons
    assert all(e["firstTimestamp"] for e in events)


async def test_max_restarts_two_restarts_the_set_exactly_twice_then_fails(plane: Plane) -> None:
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        make_jobset(
            "crash", [PY, "-c", "raise SystemExit(3)"], pods=2, failurePolicy={"maxRestarts": 2}
        ),
    )
    done = await plane.terminal("crash")
    status = done["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"].startswith("jobset failed due to reaching max number of restarts")
    assert (status["restarts"], status["restartsCountTowardsMax"]) == (2, 2)
    pods = await plane.pods("crash")
    assert {p["metadata"]["labels"][LBL + "restart-attempt"] for p in pods} == {"2"}

    async def exit_codes() -> set[int] | None:
        # The JobSet fails with its first failed pod; the other one's exit is reported after.
        states = [
            (p.get("status") or {}).get("containerStatuses", [{}])[0].get("state") or {}
            for p in await plane.pods("crash")
        ]
        if all("terminated" in state for state in states):
            return {state["terminated"]["exitCode"] for state in states}
        return None

    assert await plane.wait_for(exit_codes, 10) == {3}
    events = await plane.events()
    assert [e["reason"] for e in events].count("RestartJobSetFailurePolicyAction") == 2


async def test_on_failure_restarts_the_container_in_place_and_counts_it(plane: Plane) -> None:
    script = "import os,sys; p='/tmp/x' ; sys.exit(0 if os.path.exists('/data/ok') else (open('/data/ok','w') and 1))"
    js = make_jobset(
        "inplace", [PY, "-c", script], pods=1, restart_policy="OnFailure", backoff_limit=6
    )
    pod_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    done = await plane.terminal("inplace")
    assert done["status"]["terminalState"] == "Completed"
    [pod] = await plane.pods("inplace")
    cs = pod["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert "BackOff" in {e["reason"] for e in await plane.events()}


async def test_suspend_stops_every_process_and_resume_starts_them_again(plane: Plane) -> None:
    tag = marker()
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        make_jobset("sus", ["sh", "-c", f"exec sleep 300 # {tag}"], pods=2),
    )

    async def running() -> bool:
        pods = await plane.pods("sus")
        return len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)

    await plane.wait_for(running)
    assert len(processes_with(tag)) >= 2
    await plane.api.patch(
        JOBSET.api_version, JOBSET.plural, "sus", {"spec": {"suspend": True}}, namespace="default"
    )

    async def stopped() -> bool:
        return not await plane.pods("sus") and not processes_with(tag)

    await plane.wait_for(stopped, timeout=10)
    js = await plane.jobset("sus")
    suspended = next(c for c in js["status"]["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("True", "SuspendedJobs")
    assert js["status"]["replicatedJobsStatus"][0]["suspended"] == 1
    await plane.api.patch(
        JOBSET.api_version, JOBSET.plural, "sus", {"spec": {"suspend": False}}, namespace="default"
    )
    await plane.wait_for(running)
    js = await plane.jobset("sus")
    resumed = next(c for c in js["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "ResumeJobs")


async def test_deleting_the_jobset_kills_every_process_within_five_seconds(plane: Plane) -> None:
    # A shell that ignores SIGTERM, with a child of its own: only the group-wide SIGKILL after
    # the (capped) grace period ends them. The odd sleep length marks their command lines.
    tag = f"300.{uuid.uuid4().int % 10**9:09d}"
    command = ["sh", "-c", f"trap '' TERM; sleep {tag} & sleep {tag}; wait"]
    await plane.api.create(JOBSET.api_version, JOBSET.plural, make_jobset("del", command, pods=2))

    async def running() -> bool:
        pods = await plane.pods("del")
        return len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)

    async def four_sleeps() -> bool:
        return len(processes_with(f"sleep\x00{tag}")) == 4

    await plane.wait_for(running)
    await plane.wait_for(four_sleeps)
    start = time.monotonic()
    await plane.api.delete(JOBSET.api_version, JOBSET.plural, "del", namespace="default")

    async def pods_gone() -> bool:
        return await plane.pods("del") == []

    # The pods stay, terminating, until the kubelet has ended their processes (graceful
    # deletion): once they have left the API, no process of theirs is left either.
    await plane.wait_for(pods_gone, timeout=5)
    assert time.monotonic() - start < 5
    assert processes_with(tag) == []


async def test_depends_on_starts_nodes_only_after_the_initializer_completes(plane: Plane) -> None:
    init = replicated_job("dataset-initializer", [PY, "-c", "import time; time.sleep(0.5)"])
    node = replicated_job(
        "node",
        [PY, "-c", "pass"],
        depends_on=[{"name": "dataset-initializer", "status": "Complete"}],
    )
    js: dict[str, Any] = make_jobset("dep", [PY, "-c", "pass"], extra_rjobs=[init])
    js["spec"]["replicatedJobs"][1] = node
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)
    done = await plane.terminal("dep")
    assert done["status"]["terminalState"] == "Completed"
    pods = await plane.pods("dep")
    by_job = {p["metadata"]["labels"][LBL + "replicatedjob-name"]: p for p in pods}
    init_end = by_job["dataset-initializer"]["status"]["containerStatuses"][0]["state"][
        "terminated"
    ]["finishedAt"]
    node_start = by_job["node"]["status"]["containerStatuses"][0]["state"]["terminated"][
        "startedAt"
    ]
    assert node_start >= init_end
    assert by_job["node"]["metadata"]["creationTimestamp"] >= init_end


async def test_a_pod_deleted_through_the_api_is_killed_counted_as_failed_and_replaced(
    plane: Plane,
) -> None:
    tag = marker()
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        make_jobset("rep", ["sh", "-c", f"exec sleep 300 # {tag}"], pods=1, backoff_limit=1),
    )

    async def one_running() -> list[dict[str, Any]]:
        pods = [p for p in await plane.pods("rep") if p["status"].get("phase") == "Running"]
        return pods

    [pod] = await plane.wait_for(one_running)
    old_pids = set(processes_with(tag))
    await plane.api.delete(
        POD.api_version, POD.plural, pod["metadata"]["name"], namespace="default"
    )
    await plane.wait_for(lambda: _new_pod(plane, pod["metadata"]["name"]))
    [now_running] = await plane.wait_for(one_running)
    assert now_running["spec"]["hostname"] == pod["spec"]["hostname"]
    assert processes_with(tag) and not old_pids & set(processes_with(tag))
    # The Job counted the deleted pod as a failure: one more exceeds backoffLimit 1.
    await plane.api.delete(
        POD.api_version, POD.plural, now_running["metadata"]["name"], namespace="default"
    )
    done = await plane.terminal("rep")
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedJobs"


async def test_deleting_a_pod_restarts_the_whole_jobset_under_max_restarts(plane: Plane) -> None:
    tag = marker()
    js = make_jobset(
        "ft", ["sh", "-c", f"exec sleep 300 # {tag}"], pods=2, failurePolicy={"maxRestarts": 1}
    )
    await plane.api.create(JOBSET.api_version, JOBSET.plural, js)

    async def attempt_running(attempt: str) -> list[dict[str, Any]]:
        pods = [
            p
            for p in await plane.pods("ft")
            if p["status"].get("phase") == "Running"
            and p["metadata"]["labels"][LBL + "restart-attempt"] == attempt
        ]
        return pods if len(pods) == 2 else []

    first = await plane.wait_for(lambda: attempt_running("0"))
    await plane.api.delete(
        POD.api_version, POD.plural, first[1]["metadata"]["name"], namespace="default"
    )
    await plane.wait_for(lambda: attempt_running("1"))
    js_now = await plane.jobset("ft")
    assert js_now["status"]["restarts"] == 1
    names = {p["metadata"]["name"] for p in await plane.pods("ft")}
    assert not names & {p["metadata"]["name"] for p in first}


async def _new_pod(plane: Plane, old: str) -> bool:
    return any(p["metadata"]["name"] != old for p in await plane.pods("rep"))


def _with_port(js: dict[str, Any], port: int) -> dict[str, Any]:
    for rj in js["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c["ports"] = [{"containerPort": port}]
    return js


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_without_a_pod_network_a_jobset_waits_while_another_holds_a_port_it_declares(
    host_plane: Plane,
) -> None:
    plane = host_plane
    port = _free_port()
    await plane.api.create(
        JOBSET.api_version,
        JOBSET.plural,
        _with_port(make_jobset("first", ["sleep", "1.5"], pods=1), port),
    )

    async def first_running() -> bool:
        pods = await plane.pods("first")
        return bool(pods) and pods[0]["status"].get("phase") == "Running"

    await plane.wait_for(first_running)
    await plane.api.create(
        JOBSET.api_version, JOBSET.plural, _with_port(make_jobset("second", ["true"], pods=1), port)
    )

    cond = await plane.wait_for(lambda: plane.unschedulable("second"))
    assert cond["reason"] == "Unschedulable"
    assert f"port {port} is held by JobSet default/first" in cond["message"]
    await plane.terminal("first")
    done = await plane.terminal("second")
    assert done["status"]["terminalState"] == "Completed"
    [first] = await plane.pods("first")
    [second] = await plane.pods("second")
    first_end = first["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    assert second["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"] >= first_end
    assert "FailedScheduling" in {e["reason"] for e in await plane.events()}


async def test_without_a_pod_network_a_pod_waits_while_another_process_listens_on_its_port(
    host_plane: Plane,
) -> None:
    plane = host_plane
    port = _free_port()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen()
    try:
        await plane.api.create(
            JOBSET.api_version,
            JOBSET.plural,
            _with_port(make_jobset("blocked", ["true"], pods=1), port),
        )

        async def waiting() -> bool:
            pods = await plane.pods("blocked")
            conds = (pods[0]["status"].get("conditions") or []) if pods else []
            return any("in use by another process" in c.get("message", "") for c in conds)

        await plane.wait_for(waiting)
    finally:
        listener.close()
    done = await plane.terminal("blocked")
    assert done["status"]["terminalState"] == "Completed"


async def test_a_pod_the_refusal_hook_rejects_fails_with_its_message(tmp_path: Path) -> None:
    from kubetrain.local.apiserver import ApiServer
    from kubetrain.local.executor import Executor, ExecutorSettings

    def refuse(pod: Any, mode: str, why: str) -> str | None:
        names = [c["name"] for c in pod["spec"]["containers"]]
        return "flux cannot run here" if "flux" in names else None

    server = ApiServer(tmp_path, in_memory=True)
    await server.start()
    api = connect(server.write_kubeconfig())
    executor = Executor(api, ExecutorSettings(home=tmp_path, refusal=refuse))
    await executor.start()
    try:
        js = make_jobset("flux", ["true"], pods=1, backoff_limit=6, rjob="flux")
        await api.create(JOBSET.api_version, JOBSET.plural, js)
        plane = Plane(api, tmp_path, executor, server)
        done = await plane.terminal("flux")
        assert done["status"]["terminalState"] == "Failed"
        [pod] = await plane.pods("flux")
        assert (pod["status"]["reason"], pod["status"]["message"]) == (
            "UnsupportedOnLocalEngine",
            "flux cannot run here",
        )
        assert "UnsupportedOnLocalEngine" in {e["reason"] for e in await plane.events()}
    finally:
        await executor.stop(kill_pods=True)
        await api.close()
        await server.close()
