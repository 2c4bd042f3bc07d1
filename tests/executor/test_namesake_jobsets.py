"""A JobSet created again under the name of one just deleted (a TrainJob deleted and created
again, as users do) while the old one's pods are still stopping: the executor's view of the
cluster shows those pods to the new JobSet as remains to wait for, never as its own."""

from __future__ import annotations

import copy
from typing import Any

from jobset_sim import Sim, make_jobset, rjob

from kubetrain.local.executor.cache import Cluster, key_of
from kubetrain.local.executor.jobset_logic import reconcile


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
