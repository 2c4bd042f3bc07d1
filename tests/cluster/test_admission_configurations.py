"""The API server calls the installed webhooks as kube-apiserver does: from the stored
configurations, over HTTPS verified against their caBundle, through the Service to a ready pod.

The webhook server is kubetrain's own (``kubetrain controller`` serves it in a cluster), the
configurations are the ones ``manifests/`` installs, and the CA bundle is injected by the
controller's own code. The "pod" behind the Service is a stored Pod whose IP is loopback.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_support import client_for, loopback_controller_pod

from kubetrain.cli.cmd_controller import admission_rules
from kubetrain.controller.cluster import inject_ca_bundle
from kubetrain.controller.deploy import NAME, NAMESPACE, install_objects
from kubetrain.controller.pki import ServingCert, ensure_serving_cert, service_dns_names
from kubetrain.controller.webhook import AdmissionHandler, WebhookServer
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.admission import PermissiveAdmission
from kubetrain.local.apiserver.ops import WriteOptions
from kubetrain.local.apiserver.rbac import User
from kubetrain.local.apiserver.resources import BUILTIN_RESOURCES
from kubetrain.local.apiserver.webhooks import AdmissionAttributes, applies
from kubetrain.testing import make_trainjob

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"
ADMISSION = "admissionregistration.k8s.io/v1"
MUTATE_URL = (
    f"https://{NAME}.{NAMESPACE}.svc:443/mutate-trainer-kubeflow-org-v1alpha1-trainjob?timeout=10s"
)


@dataclass
class Plane:
    server: ApiServer
    kube: KubeClient
    cert: ServingCert
    webhook: WebhookServer
    port: int
    tmp: Path

    async def start_webhook(self) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert.cert_file, self.cert.key_file)
        self.webhook = WebhookServer(AdmissionHandler(self.kube, admission_rules()))
        self.port = await self.webhook.start("127.0.0.1", self.port, context)

    def stored(self, name: str) -> Obj | None:
        return self.server.reader.get(TRAINER, "TrainJob", "default", name)


@pytest.fixture
async def plane(tmp_path: Path, crds: list[Obj]) -> AsyncIterator[Plane]:
    from kubetrain.runtime.defaults import default_runtimes

    server = ApiServer(
        tmp_path / "home",
        crds=crds,
        admission=PermissiveAdmission(),  # no in-process shortcut: only the webhooks decide
        seed_objects=default_runtimes,
        in_memory=True,
    )
    await server.start()
    kube = client_for(server)
    cert = ensure_serving_cert(tmp_path / "pki", service_dns_names(NAME, NAMESPACE), [])
    plane = Plane(
        server, kube, cert, WebhookServer(AdmissionHandler(kube, admission_rules())), 0, tmp_path
    )
    try:
        await plane.start_webhook()
        for obj in install_objects("manager"):
            if obj["kind"] in (
                "Service",
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration",
            ):
                await kube.apply(obj["kind"].lower() + "s", obj, field_manager="kubectl")
        await loopback_controller_pod(kube, plane.port)
        assert await inject_ca_bundle(kube, cert.ca_pem)
        yield plane
    finally:
        await plane.webhook.stop()
        await kube.close()
        await server.close()


async def test_the_installed_webhooks_mutate_and_validate_over_https(plane: Plane) -> None:
    job = (
        make_trainjob("patched")
        .pod_patch("example.com/m", "node", {"nodeSelector": {"a": "b"}})
        .obj()
    )
    assert "time" not in job["spec"]["runtimePatches"][0]
    created = await plane.kube.create(TRAINER, "trainjobs", job)
    # The defaulter's JSONPatch stamped the time, as upstream's mutating webhook does.
    assert created["spec"]["runtimePatches"][0]["time"]
    with pytest.raises(ApiError) as refused:
        await plane.kube.create(TRAINER, "trainjobs", make_trainjob("gone").runtime("gone").obj())
    assert refused.value.code == 403
    assert refused.value.message.startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
    )
    assert plane.stored("gone") is None
    assert plane.server.webhooks.calls >= 3


async def test_a_webhook_that_is_down_refuses_with_the_api_servers_message_until_it_is_back(
    plane: Plane,
) -> None:
    trainjobs = (TRAINER, "trainjobs")
    await plane.webhook.stop()
    with pytest.raises(ApiError) as down:
        await plane.kube.create(*trainjobs, make_trainjob("while-down").obj())
    assert (down.value.code, down.value.reason) == (500, "InternalError")
    assert down.value.message == (
        'Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.kubeflow.org": '
        f'failed to call webhook: Post "{MUTATE_URL}": '
        f"dial tcp 127.0.0.1:{plane.port}: connect: connection refused"
    )
    # The pod gone (the controller killed): the Service has no endpoints.
    await plane.kube.delete("v1", "pods", "controller-0", namespace=NAMESPACE)
    with pytest.raises(ApiError) as no_pod:
        await plane.kube.create(*trainjobs, make_trainjob("while-down").obj())
    assert no_pod.value.message == (
        'Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.kubeflow.org": '
        f'failed to call webhook: Post "{MUTATE_URL}": no endpoints available for service "{NAME}"'
    )
    assert plane.stored("while-down") is None  # nothing half-admitted
    await plane.start_webhook()
    await loopback_controller_pod(plane.kube, plane.port)
    created = await plane.kube.create(*trainjobs, make_trainjob("while-down").obj())
    assert created["metadata"]["uid"]


async def _pod_unready(kube: KubeClient) -> None:
    status = {"conditions": [{"type": "Ready", "status": "False"}]}
    await kube.patch("v1", "pods", "controller-0", {"status": status},
                     namespace=NAMESPACE, subresource="status")  # fmt: skip


async def _service_selects_other_pods(kube: KubeClient) -> None:
    await kube.patch("v1", "services", NAME, {"spec": {"selector": {"app": "other"}}},
                     namespace=NAMESPACE)  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [_pod_unready, _service_selects_other_pods],
    ids=["a pod that turns unready", "a Service that selects other pods"],
)
async def test_the_next_call_after_a_change_behind_the_service_finds_no_endpoints(
    plane: Plane, change: Any
) -> None:
    """The pod a call resolved is kept only while no Service or Pod is written."""
    trainjobs = (TRAINER, "trainjobs")
    await plane.kube.create(*trainjobs, make_trainjob("before").obj())
    await change(plane.kube)
    with pytest.raises(ApiError) as refused:
        await plane.kube.create(*trainjobs, make_trainjob("after").obj())
    assert refused.value.message.endswith(f'no endpoints available for service "{NAME}"')
    assert plane.stored("after") is None


async def test_through_the_kubelets_relay_a_webhook_answers_and_a_refused_port_is_named(
    plane: Plane,
) -> None:
    """Pods in their own network namespaces are reached through a relay the kubelet starts
    there. Here the real relay runs in this namespace (``env`` as the way in): a call through it
    is answered, and when nothing listens on the pod's port the refusal says which dial failed
    and why, not merely that the connection closed."""
    from kubetrain.local.sandbox.enter import dial_pod

    async def dial(pod: Any, port: int) -> Any:
        return await dial_pod(("env",), "", port)

    plane.server.webhooks.dial = dial
    job = make_trainjob("relayed").pod_patch("example.com/m", "node", {"nodeSelector": {}}).obj()
    created = await plane.kube.create(TRAINER, "trainjobs", job)
    assert created["spec"]["runtimePatches"][0]["time"]  # the defaulter answered
    await plane.webhook.stop()
    with pytest.raises(ApiError) as down:
        await plane.kube.create(TRAINER, "trainjobs", make_trainjob("while-down").obj())
    assert down.value.message == (
        'Internal error occurred: failed calling webhook "defaulter.trainjob.trainer.kubeflow.org": '
        f'failed to call webhook: Post "{MUTATE_URL}": dial tcp 127.0.0.1:{plane.port}: '
        f"failed to connect to localhost:{plane.port} inside the pod's network namespace: "
        "Connection refused"
    )
    assert plane.stored("while-down") is None


async def test_a_caBundle_that_did_not_sign_the_certificate_is_a_failed_call(plane: Plane) -> None:
    other = ensure_serving_cert(plane.tmp / "other-pki", ["elsewhere"], [])
    config = await plane.kube.get(
        ADMISSION, "mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"
    )
    config["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(
        other.ca_pem.encode()
    ).decode()
    await plane.kube.replace(ADMISSION, "mutatingwebhookconfigurations", config)
    with pytest.raises(ApiError) as refused:
        await plane.kube.create(TRAINER, "trainjobs", make_trainjob("tls").obj())
    assert refused.value.code == 500
    assert "tls: failed to verify certificate" in refused.value.message


async def _fail_open(plane: Plane) -> None:
    """Every webhook of both configurations set to ``failurePolicy: Ignore``."""
    for plural, name in (
        ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"),
        ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org"),
    ):
        config = await plane.kube.get(ADMISSION, plural, name)
        for webhook in config["webhooks"]:
            webhook["failurePolicy"] = "Ignore"
        await plane.kube.replace(ADMISSION, plural, config)


async def test_failure_policy_ignore_admits_while_the_webhook_is_down(plane: Plane) -> None:
    await _fail_open(plane)
    await plane.webhook.stop()
    created = await plane.kube.create(TRAINER, "trainjobs", make_trainjob("ignored").obj())
    assert created["metadata"]["name"] == "ignored"


async def test_a_changed_configuration_applies_to_the_very_next_write(plane: Plane) -> None:
    # The first write finds which webhooks' rules name TrainJob creates (the server keeps that).
    await plane.kube.create(TRAINER, "trainjobs", make_trainjob("before").obj())
    await _fail_open(plane)
    await plane.webhook.stop()
    created = await plane.kube.create(TRAINER, "trainjobs", make_trainjob("after").obj())
    assert created["metadata"]["name"] == "after"


async def test_a_dry_run_refuses_webhooks_with_side_effects(plane: Plane) -> None:
    config = await plane.kube.get(
        ADMISSION, "validatingwebhookconfigurations", "validator.trainer.kubeflow.org"
    )
    for webhook in config["webhooks"]:
        webhook["sideEffects"] = "Some"
    await plane.kube.replace(ADMISSION, "validatingwebhookconfigurations", config)
    with pytest.raises(E.ApiError) as refused:
        await plane.server.engine.create(
            TRAINJOBS, "default", make_trainjob("dry").obj(), WriteOptions(dry_run=True)
        )
    assert refused.value.code == 400
    assert (
        refused.value.message
        == 'admission webhook "validator.trainjob.trainer.kubeflow.org" does not support dry run'
    )


# -- which webhooks apply ---------------------------------------------------------------------

_RES = {(r.group, r.plural): r for r in BUILTIN_RESOURCES}
TRAINJOBS = _RES[("trainer.kubeflow.org", "trainjobs")]
NAMESPACES = _RES[("", "namespaces")]
CTR = _RES[("trainer.kubeflow.org", "clustertrainingruntimes")]


def _hook(rule: Obj | None = None, **extra: Any) -> Obj:
    base = {
        "apiGroups": ["trainer.kubeflow.org"],
        "apiVersions": ["v1alpha1"],
        "operations": ["CREATE"],
        "resources": ["trainjobs"],
    }
    return {"name": "h", "rules": [{**base, **(rule or {})}], **extra}


def _attrs(
    res: Any = TRAINJOBS,
    op: str = "CREATE",
    sub: str = "",
    ns: str = "team",
    labels: Obj | None = None,
    old_labels: Obj | None = None,
) -> AdmissionAttributes:
    obj = {"metadata": {"name": "x", "labels": labels or {}}}
    old = {"metadata": {"name": "x", "labels": old_labels}} if old_labels is not None else None
    return AdmissionAttributes(op, res, sub, ns, "x", obj, old, User("u"))


TEAM = {"metadata": {"name": "team", "labels": {"env": "prod"}}}
APPLIES = [
    ("a rule naming the resource and operation", _hook(), _attrs(), True),
    ("another operation", _hook(), _attrs(op="UPDATE"), False),
    ("* operations", _hook({"operations": ["*"]}), _attrs(op="UPDATE"), True),
    ("another API version", _hook({"apiVersions": ["v1"]}), _attrs(), False),
    ("a resource does not match its subresource", _hook(), _attrs(op="CREATE", sub="status"), False),
    ("resource/* matches its subresources", _hook({"resources": ["trainjobs/*"]}), _attrs(sub="status"), True),
    ("* does not match subresources", _hook({"resources": ["*"]}), _attrs(sub="status"), False),
    ("*/status matches every status", _hook({"resources": ["*/status"]}), _attrs(sub="status"), True),
    ("Namespaced scope skips cluster-scoped kinds", _hook({"resources": ["*"], "scope": "Namespaced"}), _attrs(CTR, ns=""), False),
    ("Cluster scope takes cluster-scoped kinds", _hook({"resources": ["*"], "scope": "Cluster"}), _attrs(CTR, ns=""), True),
    ("Cluster scope skips namespaced kinds", _hook({"scope": "Cluster"}), _attrs(), False),
    ("Cluster scope takes Namespaces", _hook({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"], "scope": "Cluster"}),
     _attrs(NAMESPACES, ns="x"), True),
    ("a namespaceSelector the namespace matches", _hook(namespaceSelector={"matchLabels": {"env": "prod"}}), _attrs(), True),
    ("a namespaceSelector the namespace misses", _hook(namespaceSelector={"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}),
     _attrs(), False),
    ("a namespaceSelector never excludes cluster-scoped kinds", _hook({"resources": ["*"]}, namespaceSelector={"matchLabels": {"env": "dev"}}),
     _attrs(CTR, ns=""), True),
    ("an objectSelector on the new object", _hook(objectSelector={"matchLabels": {"team": "a"}}), _attrs(labels={"team": "a"}), True),
    ("an objectSelector on the old object", _hook({"operations": ["UPDATE"]}, objectSelector={"matchLabels": {"team": "a"}}),
     _attrs(op="UPDATE", labels={}, old_labels={"team": "a"}), True),
    ("an objectSelector neither matches", _hook(objectSelector={"matchLabels": {"team": "a"}}), _attrs(labels={"team": "b"}), False),
    ("upstream's opt-out label", _hook(objectSelector={"matchExpressions": [
        {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}]}),
     _attrs(labels={"trainer.kubeflow.org/webhook-validation": "disabled"}), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("hook", "attrs", "expected"), [c[1:] for c in APPLIES], ids=[c[0] for c in APPLIES]
)
def test_which_webhooks_apply(hook: Obj, attrs: AdmissionAttributes, expected: bool) -> None:
    namespace = TEAM if attrs.namespace == "team" else None
    assert applies(hook, attrs, namespace) is expected


async def test_a_url_webhook_mutates_and_a_write_that_raced_it_is_applied_again(
    plane: Plane,
) -> None:
    """A patch whose object changed while its webhook ran is patched again onto what is stored
    (nothing lost, as kube-apiserver's retried update); the webhook is called by ``url``."""
    import json

    from aiohttp import web

    cert = ensure_serving_cert(plane.tmp / "url-pki", [], ["127.0.0.1"])
    calls: list[str] = []

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        calls.append(req["object"]["data"].get("step", ""))
        if len(calls) == 1:  # meanwhile someone else changes the ConfigMap
            await plane.kube.patch(
                "v1", "configmaps", "cm", {"data": {"other": "x"}}, namespace="default"
            )
        patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
        response = {"uid": req["uid"], "allowed": True, "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(patch).encode()).decode()}  # fmt: skip
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=cert.server_context())
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await plane.kube.create(
            "v1", "configmaps", {"metadata": {"name": "cm", "namespace": "default"}, "data": {}}
        )
        config = {
            "apiVersion": ADMISSION,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "label-configmaps"},
            "webhooks": [
                {
                    "name": "label.example.com",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate",
                        "caBundle": base64.b64encode(cert.ca_pem.encode()).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                }
            ],
        }
        await plane.kube.create(ADMISSION, "mutatingwebhookconfigurations", config)
        patched = await plane.kube.patch(
            "v1", "configmaps", "cm", {"data": {"step": "one"}}, namespace="default"
        )
        assert patched["data"] == {"step": "one", "other": "x"}
        assert patched["metadata"]["labels"] == {"mutated": "yes"}
        assert calls == ["one", "", "one"]
    finally:
        await runner.cleanup()
