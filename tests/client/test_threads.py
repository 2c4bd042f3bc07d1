"""The SDK is safe from several threads at once: one client, eight threads, no lock of ours."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.api.schema import crd_manifests
from kubetrain.client import resources as R
from kubetrain.client.connection import connect
from kubetrain.client.jobs import JobClient
from kubetrain.local.apiserver import ApiServer, ServerThread
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.testing import make_trainjob

THREADS = 8
ROUNDS = 15


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("threads-home")
    thread = ServerThread(
        lambda: ApiServer(home, crds=crd_manifests(), seed_objects=default_runtimes())
    )
    thread.start()
    yield thread.write_kubeconfig(home / "kubeconfig")
    thread.stop()


def test_eight_threads_share_one_client(kubeconfig: Path) -> None:
    jc = JobClient(connect(kubeconfig=kubeconfig, context="kubetrain-local", namespace="default"))
    failures: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def hammer(worker: int) -> None:
        try:
            start.wait()  # every thread decodes its first answers at the same moment
            for i in range(ROUNDS):
                name = f"t{worker}-{i}"
                job = make_trainjob(name).runtime("torch-distributed").obj()
                (result,) = jc.apply([job])
                assert result.action == "created"
                assert jc.get(R.TRAINJOB, name)["metadata"]["name"] == name
                assert jc.objects(R.CLUSTER_TRAINING_RUNTIME)
                assert jc.set_suspend(name, True)
                jc.delete_job(name, wait=False)
        except BaseException as err:  # collected, raised by the test below
            failures.append(err)

    workers = [threading.Thread(target=hammer, args=(w,)) for w in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    jc.close()
    assert not [w for w in workers if w.is_alive()], "a thread never finished"
    assert failures == []
    left = JobClient(connect(kubeconfig=kubeconfig, context="kubetrain-local"))
    with left:
        assert left.objects(R.TRAINJOB) == []
