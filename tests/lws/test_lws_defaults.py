"""LeaderWorkerSet's webhook defaults on the local engine, as LWS v0.10.0's defaulting webhook
sets them (``pkg/webhooks/leaderworkerset_webhook.go``, ``Default``): a restart policy
(``Default`` read as ``None``), a rolling update of one group at a time, a shared subdomain.
The CRD's own defaults (``tests/lws/test_lws_crd.py``) come first; the API server then admits
every LeaderWorkerSet through `LwsDefaulter`, as the daemon builds it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import codec
from kubetrain.controller import connect
from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.lws import LwsDefaulter, lws_crd
from kubetrain.local.lws.admission import default_lws

WORKER = {"spec": {"containers": [{"name": "w", "image": "x"}]}}
ROLLING = {
    "type": "RollingUpdate",
    "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1, "maxSurge": 0},
}
SHARED = {"subdomainPolicy": "Shared"}
RECREATE = "RecreateGroupOnPodRestart"


def lws(spec: dict[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": WORKER, **(template or {})}, **spec},
    }


# (id, spec given, leaderWorkerTemplate fields given, spec after defaulting, template fields after)
DEFAULTS = [
    ("nothing given gets a restart policy, a rolling update and a shared subdomain",
     {}, {}, {"rolloutStrategy": ROLLING, "networkConfig": SHARED}, {"restartPolicy": RECREATE}),
    ("the deprecated Default restart policy becomes None",
     {}, {"restartPolicy": "Default"}, {"rolloutStrategy": ROLLING, "networkConfig": SHARED}, {"restartPolicy": "None"}),
    ("a restart policy given stays",
     {}, {"restartPolicy": "RecreateGroupAfterStart"}, {"rolloutStrategy": ROLLING, "networkConfig": SHARED}, {"restartPolicy": "RecreateGroupAfterStart"}),
    ("an empty rollout strategy becomes a rolling update of one group at a time",
     {"rolloutStrategy": {}}, {}, {"rolloutStrategy": ROLLING, "networkConfig": SHARED}, {"restartPolicy": RECREATE}),
    ("a null rollout strategy is the same as none",
     {"rolloutStrategy": None}, {}, {"rolloutStrategy": ROLLING, "networkConfig": SHARED}, {"restartPolicy": RECREATE}),
    ("a rolling update configuration given is kept as given (the CRD fills its fields)",
     {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 2}}}, {},
     {"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 2}, "type": "RollingUpdate"}, "networkConfig": SHARED},
     {"restartPolicy": RECREATE}),
    ("a network config without a policy gets Shared",
     {"networkConfig": {}}, {}, {"networkConfig": SHARED, "rolloutStrategy": ROLLING}, {"restartPolicy": RECREATE}),
    ("a subdomain policy given stays",
     {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}}, {},
     {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}, "rolloutStrategy": ROLLING}, {"restartPolicy": RECREATE}),
    ("a field of the wrong type is left for validation to name",
     {"rolloutStrategy": "fast", "networkConfig": ["x"]}, {},
     {"rolloutStrategy": "fast", "networkConfig": ["x"]}, {"restartPolicy": RECREATE}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "template", "want_spec", "want_template"),
    [pytest.param(*d[1:], id=d[0]) for d in DEFAULTS],
)
def test_lws_webhook_default(
    spec: dict[str, Any],
    template: dict[str, Any],
    want_spec: dict[str, Any],
    want_template: dict[str, Any],
) -> None:
    given = lws(spec, template)
    before = codec.clone(given)
    got = default_lws(given)
    assert given == before, "the argument is left as it is"
    assert got == lws(want_spec, want_template)


def test_another_group_and_deletes_pass_unchanged() -> None:
    defaulter = LwsDefaulter()
    other = {"apiVersion": "v1", "kind": "LeaderWorkerSet", "metadata": {"name": "p"}, "spec": {}}
    assert defaulter.mutate("CREATE", codec.clone(other), None, reader=_NO_READER) == other
    assert defaulter.mutate("DELETE", lws({}), None, reader=_NO_READER) == lws({})


class _NoReader:
    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        raise AssertionError("LWS's defaults read no other object")

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Any]:
        raise AssertionError("LWS's defaults read no other object")


_NO_READER = _NoReader()


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[KubeClient]:
    server = ApiServer(tmp_path, in_memory=True, crds=[lws_crd()], admission=LwsDefaulter())
    await server.start()
    kube = connect(server.write_kubeconfig())
    try:
        yield kube
    finally:
        await kube.close()
        await server.close()


async def test_the_api_server_stores_crd_and_webhook_defaults(client: KubeClient) -> None:
    created = await client.create(
        "leaderworkerset.x-k8s.io/v1", "leaderworkersets", lws({}, {"restartPolicy": "Default"})
    )
    assert created["spec"] == {
        "replicas": 1,
        "startupPolicy": "LeaderCreated",
        "rolloutStrategy": ROLLING,
        "networkConfig": SHARED,
        "leaderWorkerTemplate": {"workerTemplate": WORKER, "size": 1, "restartPolicy": "None"},
    }
    # A status write is not the webhook's (it matches leaderworkersets, not their status).
    status = {"replicas": 1}
    written = await client.patch(
        "leaderworkerset.x-k8s.io/v1", "leaderworkersets", "s", {"status": status},
        namespace="default", subresource="status",
    )  # fmt: skip
    assert (written["spec"], written["status"]) == (created["spec"], status)
