"""The cluster the contract suite talks to.

By default an embedded ``ApiServer`` started once per session (in a background thread, over
https with a bearer token, exactly as ``kubetrain serve`` runs it). With
``KUBETRAIN_CONTRACT_KUBECONFIG`` set, the same tests run against that cluster instead (it needs
the Trainer and JobSet CRDs installed); tests that need the embedded server's insides skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from apiserver_support import TRAINER, Cluster

from kubetrain.local.apiserver import ApiServer, ServerThread

EXTERNAL = os.environ.get("KUBETRAIN_CONTRACT_KUBECONFIG")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cache = tmp_path_factory.mktemp("kubectl-cache")
    if EXTERNAL:
        yield Cluster(Path(EXTERNAL), cache, None, None)
        return
    from kubetrain.api.schema import crd_manifests

    home = tmp_path_factory.mktemp("kubetrain-home")
    crds = crd_manifests()
    thread = ServerThread(lambda: ApiServer(home, crds=crds, bookmark_interval=0.5, history=2000))
    server = thread.start()
    path = server.write_kubeconfig(home / "kubeconfig")
    yield Cluster(path, cache, server, thread)
    thread.stop()


@pytest.fixture
def embedded(cluster: Cluster) -> ApiServer:
    """The embedded server, for tests that look inside it; skips against a real cluster."""
    if cluster.server is None:
        pytest.skip("needs the embedded API server")
    return cluster.server


@pytest.fixture(scope="session")
def api_client(cluster: Cluster) -> Iterator[Any]:
    from kubernetes import config

    client = config.new_client_from_config(str(cluster.kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="session")
def custom(api_client: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="session")
def core(api_client: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture
def ns(core: Any) -> Iterator[str]:
    """A fresh namespace per test, so tests never see each other's objects."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    from kubernetes.client import ApiException

    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def tj_api(custom: Any, ns: str) -> Callable[..., Any]:
    """``tj_api("create", body)`` → the CustomObjectsApi call for TrainJobs in ``ns``."""

    def call(verb: str, *args: Any, **kwargs: Any) -> Any:
        base, _, sub = verb.partition("_")
        fn = getattr(custom, f"{base}_namespaced_custom_object" + (f"_{sub}" if sub else ""))
        return fn(*TRAINER, ns, "trainjobs", *args, **kwargs)

    return call
