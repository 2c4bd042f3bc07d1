"""The official Kubernetes Python client's own e2e tests, unchanged, against this API server.

The suite is not in the repository: ``python tools/fetch_upstream.py --client-e2e`` fetches it
(pinned, checked by sha256) into ``.upstream/kubernetes-client/site``; without it these tests
skip and say so. Here the server-only tests run against the session's embedded API server (no
executor: tests that need running pods, exec or port-forward are left to
``benchmarks/kube_client_e2e.py``, which runs the whole suite against ``kubetrain serve``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from apiserver_support import Cluster

from upstream_data import REPO, find

SITE = "kubernetes-client/site"

# Tests of API shapes and semantics only; each needs nothing but the API server.
SERVER_ONLY = (
    "kubernetes/e2e_test/test_client.py::TestClient::test_configmap_apis",
    "kubernetes/e2e_test/test_client.py::TestClient::test_service_apis",
    "kubernetes/e2e_test/test_client.py::TestClient::test_replication_controller_apis",
    "kubernetes/e2e_test/test_utils.py::TestUtils::test_create_apiservice_from_yaml_with_conflict",
    "kubernetes/e2e_test/test_utils.py::TestUtils::test_create_from_multi_resource_yaml_with_conflict",
    "kubernetes/e2e_test/test_utils.py::TestUtils::test_create_from_multi_resource_yaml_with_multi_conflicts",
    "kubernetes/e2e_test/test_utils.py::TestUtils::test_create_rbac_role_from_yaml",
    "kubernetes/e2e_test/test_apps.py::TestClientApps::test_create_daemonset",
    "kubernetes/e2e_test/test_batch.py::TestClientBatch::test_job_apis",
    "kubernetes/aio/e2e_test/test_apply_patch.py::TestApplyPatch::test_apply_patch",
)


def _harness() -> ModuleType:
    path = REPO / "benchmarks" / "kube_client_e2e.py"
    spec = importlib.util.spec_from_file_location("kube_client_e2e", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kube_client_e2e", module)
    spec.loader.exec_module(module)
    return module


def test_the_clients_server_tests_pass_unchanged(cluster: Cluster) -> None:
    site = find(SITE)
    harness = _harness()
    if site is None or harness.missing(site):
        pytest.skip(
            f"the kubernetes client's e2e suite ({SITE}) is missing "
            "(run `python tools/fetch_upstream.py --client-e2e` to fetch it)"
        )
    outcomes = harness.run_suite(
        Path(site), per_test=60, kubeconfig=cluster.kubeconfig, tests=SERVER_ONLY
    )
    results = {o.test: (o.result, o.reason) for o in outcomes}
    assert {t: results.get(t, ("not run", ""))[0] for t in SERVER_ONLY} == dict.fromkeys(
        SERVER_ONLY, "passed"
    ), results
