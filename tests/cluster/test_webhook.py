"""The admission webhook server over HTTPS, checked against the embedded API server's admission.

Every TrainJob the embedded API server refuses in admission (403) must come back from the
webhook server, once the kube-apiserver's wrapping is applied, with the same code, reason and
message. Objects the API server already refuses by schema (422) never reach a webhook in a
cluster; the webhook must still deny them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cluster_support import trusting

from kubetrain.cli.cmd_controller import admission_rules
from kubetrain.controller.pki import ensure_serving_cert
from kubetrain.controller.webhook import (
    WEBHOOKS,
    AdmissionHandler,
    WebhookServer,
    admission_review,
    json_patch,
)
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.local.apiserver.webhooks import denial
from kubetrain.testing import make_runtime, make_trainjob

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"
VALIDATE_TRAINJOB = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
MUTATE_TRAINJOB = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_CTR = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
VALIDATE_TR = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"


@dataclass
class Hook:
    url: str
    ssl: Any
    session: aiohttp.ClientSession
    handler: AdmissionHandler

    async def post(self, path: str, review: Obj) -> Obj:
        async with self.session.post(self.url + path, json=review, ssl=self.ssl) as resp:
            assert resp.status == 200, await resp.text()
            body: Obj = await resp.json()
            return body


@pytest.fixture
async def hook(kube: KubeClient, tmp_path: Path) -> AsyncIterator[Hook]:
    cert = ensure_serving_cert(
        tmp_path / "pki",
        ["kubeflow-trainer-controller-manager.kubeflow-system.svc"],
        ["127.0.0.1"],
    )
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    handler = AdmissionHandler(kube, admission_rules())
    server = WebhookServer(handler)
    port = await server.start("127.0.0.1", 0, context)
    session = aiohttp.ClientSession()
    try:
        yield Hook(f"https://127.0.0.1:{port}", trusting(cert.ca_pem), session, handler)
    finally:
        await session.close()
        await server.stop()


def _runtime_with_injection() -> Obj:
    return (
        make_runtime("inject")
        .torch(envInjection={"targets": [{"jobName": "node", "containerNames": ["ghost"]}]})
        .job("node", ancestor="trainer")
        .obj()
    )


# (TrainJob, runtime to create first or None). Names are unique so cases never collide.
DENIED = [
    pytest.param(
        make_trainjob("env").trainer(env={"PET_NODE_RANK": "0", "PET_MASTER_PORT": "1"}).obj(),
        None,
        id="torch reserved envs",
    ),
    pytest.param(
        make_trainjob("gone-ctr").runtime("gone").obj(), None, id="missing ClusterTrainingRuntime"
    ),
    pytest.param(
        make_trainjob("gone-tr").runtime("gone", kind="TrainingRuntime").obj(),
        None,
        id="missing TrainingRuntime",
    ),
    pytest.param(
        make_trainjob("init").dataset("hf://x").model("hf://y").obj(),
        None,
        id="initializers need their jobs (two errors, aggregated)",
    ),
    pytest.param(
        make_trainjob("mgr").pod_patch("kueue.k8s.io/", "node", {"nodeSelector": {"a": "b"}}).obj(),
        None,
        id="patch manager needs a path",
    ),
    pytest.param(
        make_trainjob("nojob").pod_patch("a.io/m", "launcher", {"nodeSelector": {"a": "b"}}).obj(),
        None,
        id="patched job must exist",
    ),
    pytest.param(
        make_trainjob("nodeenv")
        .pod_patch("a.io/m", "node", {"containers": [{"name": "node", "env": [{"name": "X"}]}]})
        .obj(),
        None,
        id="patches must not set env on node",
    ),
    pytest.param(
        make_trainjob("xgb")
        .runtime("xgboost-distributed")
        .trainer(env={"DMLC_TASK_ID": "3"})
        .obj(),
        None,
        id="xgboost reserved env",
    ),
    pytest.param(
        make_trainjob("inj").runtime("inject").obj(),
        _runtime_with_injection(),
        id="envInjection target must exist",
    ),
    pytest.param(
        make_trainjob("tune")
        .runtime("torchtune-qwen2.5-1.5b")
        .trainer(command=["tune", "run"], args=["output_dir=/x"])
        .obj(),
        None,
        id="torchtune managed keys",
    ),
    pytest.param(
        make_trainjob("foo").runtime("r", kind="Foo", api_group="example.com").obj(),
        None,
        id="unsupported runtime kind",
    ),
]


async def _refusal(kube: KubeClient, obj: Obj) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await kube.create(TRAINER, "trainjobs", obj)
    return caught.value


@pytest.mark.parametrize(("job", "runtime"), DENIED)
async def test_denials_match_the_embedded_api_server(
    kube: KubeClient, hook: Hook, job: Obj, runtime: Obj | None
) -> None:
    if runtime is not None:
        await kube.create(TRAINER, "clustertrainingruntimes", runtime)
    refused = await _refusal(kube, job)
    assert refused.code == 403, refused

    answer = (await hook.post(VALIDATE_TRAINJOB, admission_review(job)))["response"]
    assert answer["uid"] == "00000000-0000-0000-0000-000000000001"
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403 and answer["status"]["reason"] == "Forbidden"
    seen = denial("validator.trainjob.trainer.kubeflow.org", answer["status"])
    assert (seen.code, seen.reason, seen.message) == (
        refused.code,
        refused.reason,
        refused.message,
    )


SCHEMA_REFUSED = [
    pytest.param(make_trainjob("Bad_Name").obj(), id="name must be an RFC 1035 label"),
    pytest.param(make_trainjob("mb").managed_by("someone/else").obj(), id="managedBy value"),
    pytest.param(make_trainjob("uri").dataset("not a uri").obj(), id="storageUri is a URI"),
]


@pytest.mark.parametrize("job", SCHEMA_REFUSED)
async def test_schema_refusals_are_denied_too(kube: KubeClient, hook: Hook, job: Obj) -> None:
    refused = await _refusal(kube, job)
    assert refused.code in (403, 422), refused
    answer = (await hook.post(VALIDATE_TRAINJOB, admission_review(job)))["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 403


async def test_valid_trainjob_is_admitted_and_stored(kube: KubeClient, hook: Hook) -> None:
    job = make_trainjob("fine").trainer(num_nodes=2).obj()
    answer = (await hook.post(VALIDATE_TRAINJOB, admission_review(job)))["response"]
    assert answer["allowed"] is True and "warnings" not in answer
    await kube.create(TRAINER, "trainjobs", job)


async def test_update_rules_match(kube: KubeClient, hook: Hook) -> None:
    """runtimePatches may change only around a suspension: same refusal on both paths."""
    job = make_trainjob("upd").pod_patch("a.io/m", "node", {"nodeSelector": {"a": "b"}}).obj()
    stored = await kube.create(TRAINER, "trainjobs", job)
    changed = json.loads(json.dumps(stored))
    changed["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"
    ][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"a": "c"}
    with pytest.raises(ApiError) as caught:
        await kube.replace(TRAINER, "trainjobs", changed)
    refused = caught.value
    assert refused.code == 403

    review = admission_review(changed, operation="UPDATE", old=stored)
    answer = (await hook.post(VALIDATE_TRAINJOB, review))["response"]
    seen = denial("validator.trainjob.trainer.kubeflow.org", answer["status"])
    assert (seen.code, seen.message) == (refused.code, refused.message)

    # Suspending in the same update makes the change legal on both paths.
    changed["spec"]["suspend"] = True
    review = admission_review(changed, operation="UPDATE", old=stored)
    assert (await hook.post(VALIDATE_TRAINJOB, review))["response"]["allowed"] is True
    await kube.replace(TRAINER, "trainjobs", changed)


async def test_mutating_webhook_stamps_patch_times_with_a_json_patch(
    kube: KubeClient, hook: Hook
) -> None:
    job = make_trainjob("stamp").pod_patch("a.io/m", "node", {"nodeSelector": {"a": "b"}}).obj()
    answer = (await hook.post(MUTATE_TRAINJOB, admission_review(job)))["response"]
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(answer["patch"]))
    assert [(op["op"], op["path"]) for op in patch] == [("add", "/spec/runtimePatches/0/time")]
    # The embedded API server applies the same rule: the stored object has the stamp.
    stored = await kube.create(TRAINER, "trainjobs", job)
    assert "time" in stored["spec"]["runtimePatches"][0]

    # An unchanged patch keeps its time on UPDATE: nothing to patch.
    review = admission_review(stored, operation="UPDATE", old=stored)
    answer = (await hook.post(MUTATE_TRAINJOB, review))["response"]
    assert answer["allowed"] is True and "patch" not in answer


async def test_runtime_webhooks_match(kube: KubeClient, hook: Hook) -> None:
    bad = make_runtime("two").torch().job("node", ancestor="trainer", replicas=2).obj()
    with pytest.raises(ApiError) as caught:
        await kube.create(TRAINER, "clustertrainingruntimes", bad)
    answer = (await hook.post(VALIDATE_CTR, admission_review(bad)))["response"]
    seen = denial("validator.clustertrainingruntime.trainer.kubeflow.org", answer["status"])
    assert (seen.code, seen.message) == (caught.value.code, caught.value.message)

    namespaced = make_runtime("two", kind="TrainingRuntime", namespace="default").torch()
    bad_tr = namespaced.job("node", ancestor="trainer", container="main").obj()
    with pytest.raises(ApiError) as caught:
        await kube.create(TRAINER, "trainingruntimes", bad_tr)
    answer = (await hook.post(VALIDATE_TR, admission_review(bad_tr)))["response"]
    seen = denial("validator.trainingruntime.trainer.kubeflow.org", answer["status"])
    assert (seen.code, seen.message) == (caught.value.code, caught.value.message)


async def test_deprecated_runtime_warns_on_both_kinds(kube: KubeClient, hook: Hook) -> None:
    old = (
        make_runtime("old")
        .label("trainer.kubeflow.org/support", "deprecated")
        .torch()
        .job("node", ancestor="trainer")
        .obj()
    )
    answer = (await hook.post(VALIDATE_CTR, admission_review(old)))["response"]
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        'ClusterTrainingRuntime "old" is deprecated and will be removed in a future release of '
        "Kubeflow Trainer. See runtime deprecation policy: "
        "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
    ]
    await kube.create(TRAINER, "clustertrainingruntimes", old)
    job = make_trainjob("uses-old").runtime("old").obj()
    answer = (await hook.post(VALIDATE_TRAINJOB, admission_review(job)))["response"]
    assert answer["allowed"] is True
    assert answer["warnings"][0].startswith('Referenced ClusterTrainingRuntime "old" is deprecated')


async def test_counts_and_odd_requests(hook: Hook) -> None:
    async with hook.session.post(
        hook.url + VALIDATE_TRAINJOB,
        data=b"{",
        headers={"Content-Type": "application/json"},
        ssl=hook.ssl,
    ) as resp:
        assert resp.status == 400
    async with hook.session.post(hook.url + "/elsewhere", json={}, ssl=hook.ssl) as resp:
        assert resp.status == 404  # only the four webhook paths exist
    delete = admission_review(None, operation="DELETE", old=make_trainjob("x").obj())
    assert (await hook.post(VALIDATE_TRAINJOB, delete))["response"]["allowed"] is True
    assert hook.handler.counts[("validator.trainjob.trainer.kubeflow.org", True)] == 1
    assert {w.path for w in WEBHOOKS} == {
        VALIDATE_TRAINJOB,
        MUTATE_TRAINJOB,
        VALIDATE_CTR,
        VALIDATE_TR,
    }


@pytest.mark.parametrize(
    ("before", "after", "ops"),
    [
        pytest.param({"a": 1}, {"a": 1}, [], id="equal values need no patch"),
        pytest.param(
            {"a": 1}, {"a": 2}, [{"op": "replace", "path": "/a", "value": 2}], id="replace"
        ),
        pytest.param(
            {}, {"a/b": 1}, [{"op": "add", "path": "/a~1b", "value": 1}], id="escaped add"
        ),
        pytest.param({"a": 1}, {}, [{"op": "remove", "path": "/a"}], id="remove"),
        pytest.param(
            {"l": [1, 2]},
            {"l": [1]},
            [{"op": "replace", "path": "/l", "value": [1]}],
            id="lists of another length are replaced whole",
        ),
    ],
)
def test_json_patch(before: Obj, after: Obj, ops: list[Obj]) -> None:
    assert json_patch(before, after) == ops


def test_apiserver_wrapping_follows_kube_apiserver() -> None:
    assert denial("w", {"code": 200}).code == 400
    assert denial("w", {}).message == (
        'admission webhook "w" denied the request without explanation'
    )


# Where the validating webhook finds a TrainJob's runtime when it has the controller's caches:
# (in the cache, on the server, admitted). The cached-only runtime exists nowhere else, so its
# admission proves the cache answered; the server-only one, that a miss asks the server.
RUNTIME_SOURCES = [
    pytest.param(True, False, True, id="a runtime in the cache is used without asking the server"),
    pytest.param(
        False, True, True, id="a runtime the cache does not hold yet is read from the server"
    ),
    pytest.param(False, False, False, id="a runtime found in neither is refused as missing"),
]


@pytest.mark.parametrize(("cached", "stored", "admitted"), RUNTIME_SOURCES)
async def test_trainjob_webhook_reads_the_controllers_cache_first(
    kube: KubeClient, cached: bool, stored: bool, admitted: bool
) -> None:
    from kubetrain.controller.manager import Controller

    runtime = make_runtime("cached-or-stored").torch().job("node", ancestor="trainer").obj()
    caches = Controller(kube).caches  # never run: holds only what the test puts in it
    if cached:
        caches.cluster_training_runtimes.observe({**runtime, "metadata": {
            **runtime["metadata"], "resourceVersion": "1"}})  # fmt: skip
    if stored:
        await kube.create(TRAINER, "clustertrainingruntimes", runtime)
    handler = AdmissionHandler(kube, admission_rules(), caches=caches)
    job = make_trainjob("reads-cache").runtime("cached-or-stored").obj()

    answer = (await handler.review(VALIDATE_TRAINJOB, admission_review(job)))["response"]

    assert answer["allowed"] is admitted, answer
    if not admitted:
        refused = await _refusal(kube, job)
        seen = denial("validator.trainjob.trainer.kubeflow.org", answer["status"])
        assert (seen.code, seen.message) == (refused.code, refused.message)
