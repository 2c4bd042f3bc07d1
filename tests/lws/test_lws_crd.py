"""The LeaderWorkerSet CRD the local engine serves has LWS's own defaults (its kubebuilder
markers: ``config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml`` upstream), which
the API server applies; the controller repeats none of them."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.schema import Structural
from kubetrain.local.lws import lws_crd

STORED = Structural(lws_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
WORKER = {"spec": {"containers": [{"name": "w", "image": "x"}]}}


def _stored(**spec: Any) -> dict[str, Any]:
    template = {"workerTemplate": WORKER, **spec.pop("template", {})}
    obj = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "s"},
        "spec": {"leaderWorkerTemplate": template, **spec},
    }
    STORED.prune(obj)
    return STORED.default(obj)["spec"]


DEFAULTS = [
    ("replicas is 1", {}, ("replicas",), 1),
    ("startupPolicy is LeaderCreated", {}, ("startupPolicy",), "LeaderCreated"),
    ("a group's size is 1", {}, ("leaderWorkerTemplate", "size"), 1),
    ("the restart policy recreates the group", {}, ("leaderWorkerTemplate", "restartPolicy"), "RecreateGroupOnPodRestart"),
    ("a subGroupPolicy given has type LeaderWorker", {"template": {"subGroupPolicy": {"subGroupSize": 2}}}, ("leaderWorkerTemplate", "subGroupPolicy", "subGroupPolicyType"), "LeaderWorker"),
    ("a rolloutStrategy given has type RollingUpdate", {"rolloutStrategy": {}}, ("rolloutStrategy", "type"), "RollingUpdate"),
    ("a rolling update given has partition 0", {"rolloutStrategy": {"rollingUpdateConfiguration": {}}}, ("rolloutStrategy", "rollingUpdateConfiguration", "partition"), 0),
    ("a rolling update given has maxUnavailable 1", {"rolloutStrategy": {"rollingUpdateConfiguration": {}}}, ("rolloutStrategy", "rollingUpdateConfiguration", "maxUnavailable"), 1),
    ("a rolling update given has maxSurge 0", {"rolloutStrategy": {"rollingUpdateConfiguration": {}}}, ("rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"), 0),
]  # fmt: skip


@pytest.mark.parametrize(("case", "spec", "path", "value"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_lws_crd_default(
    case: str, spec: dict[str, Any], path: tuple[str, ...], value: Any
) -> None:
    got: Any = _stored(**spec)
    for key in path:
        got = got[key]
    assert got == value


def test_the_crd_adds_no_rollout_strategy_or_network_config_of_its_own() -> None:
    # Those are LWS's webhook's defaults, not its CRD's.
    assert set(_stored()) == {"replicas", "startupPolicy", "leaderWorkerTemplate"}
