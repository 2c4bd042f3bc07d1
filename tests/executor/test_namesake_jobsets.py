"""A JobSet created again under the name of one just deleted (a TrainJob deleted and created
again, as users do) while the old one's pods are still stopping: the executor's view of the
cluster shows those pods to the new JobSet as remains to wait for, never as its own; and a
status the executor decided for the old one never lands on the new one."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jobset_sim import Sim, make_jobset, rjob
from plane_helpers import make_jobset as make_plane_jobset

from kubetrain.kube.client import KubeClient, connect
from kubetrain.kube.kinds import JOBSET
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.executor.cache import Cluster, key_of
from kubetrain.local.executor.jobset_logic import reconcile
from kubetrain.local.executor.loop import Executor
from kubetrain.local.executor.settings import ExecutorSettings


def _finished_pod_of_the_old_jobset() -> dict[str, Any]:
    old = Sim(make_jobset("reuse", rjob("node")))
    old.step()
    old.run()
    old.finish()
    (pod,) = old.pods.values()
    assert pod["status"]["phase"] == "Succeeded"
    pod["metadata"]["uid"] = "pod-of-the-old-jobset"
    return pod


def test_a_new_jobset_neither_counts_nor_runs_beside_its_namesakes_stopping_pods() -> None:
    stopping = _finished_pod_of_the_old_jobset()
    new = make_jobset("reuse", rjob("node"))
    new["metadata"]["uid"] = "uid-of-the-new-jobset"
    cluster = Cluster(jobsets={key_of(new): new}, terminating={"pod-of-the-old-jobset": stopping})
    sim = Sim(copy.deepcopy(new))

    def decide() -> Any:
        pods = cluster.pods_of(new)
        return reconcile(new, pods, now=sim.now, suffix=sim.suffix, settings=sim.settings)

    waiting = decide()
    conditions = {c["type"] for c in waiting.status.get("conditions") or []}
    assert "Completed" not in conditions, "the old JobSet's success was counted as the new one's"
    assert waiting.create == [], "the new pod must wait for the old one's processes to end"
    cluster.terminating.clear()
    assert [p["metadata"]["ownerReferences"][0]["uid"] for p in decide().create] == [
        "uid-of-the-new-jobset"
    ]


# --- a late status write never lands on a namesake ----------------------------------------


async def _jobset_worker_beside_a_server(
    tmp_path: Path,
) -> AsyncIterator[tuple[KubeClient, Executor]]:
    """An API server and an executor that is never started: its JobSet worker is driven by hand
    from a cache the test fills, as the informers would have left it."""
    server = ApiServer(tmp_path, in_memory=True)
    await server.start()
    api = connect(server.write_kubeconfig())
    try:
        yield api, Executor(api, ExecutorSettings(home=tmp_path))
    finally:
        await api.close()
        await server.close()


def _suspended(name: str) -> dict[str, Any]:
    # Suspended: its first reconcile writes a status and creates no pod.
    return make_plane_jobset(name, ["true"], pods=1, suspend=True)


@pytest.mark.parametrize(
    "created_again",
    [
        pytest.param(
            False, id="a JobSet deleted after it was read writes nothing and is forgotten"
        ),
        pytest.param(
            True, id="a JobSet created again under the name gets nothing of the old one's decision"
        ),
    ],
)
async def test_a_status_write_for_a_gone_jobset_is_dropped(
    tmp_path: Path, created_again: bool
) -> None:
    async for api, executor in _jobset_worker_beside_a_server(tmp_path):
        old = await api.create(JOBSET.api_version, JOBSET.plural, _suspended("reuse"))
        key = key_of(old)
        executor.cluster.jobsets[key] = old  # what the informer saw before the deletion
        await api.delete(JOBSET.api_version, JOBSET.plural, "reuse", namespace="default")
        if created_again:
            new = await api.create(JOBSET.api_version, JOBSET.plural, _suspended("reuse"))
            assert new["metadata"]["uid"] != old["metadata"]["uid"]

        assert await executor.jobsets.reconcile(key) is None
        assert key not in executor.cluster.jobsets, "the gone JobSet must leave the cache"
        if created_again:
            stored = await api.get(JOBSET.api_version, JOBSET.plural, "reuse", namespace="default")
            assert "status" not in stored, "the old JobSet's status was written on its namesake"


async def test_a_status_write_for_the_jobset_still_there_lands(tmp_path: Path) -> None:
    async for api, executor in _jobset_worker_beside_a_server(tmp_path):
        jobset = await api.create(JOBSET.api_version, JOBSET.plural, _suspended("kept"))
        key = key_of(jobset)
        executor.cluster.jobsets[key] = jobset
        await executor.jobsets.reconcile(key)
        stored = await api.get(JOBSET.api_version, JOBSET.plural, "kept", namespace="default")
        assert stored["status"]["replicatedJobsStatus"], "the status was not written"
        assert executor.cluster.jobsets[key] == stored
