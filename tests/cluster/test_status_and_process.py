"""The status server authenticating projected tokens via TokenReview, and the whole
``kubetrain controller`` process assembly (certificates, caBundle injection, listeners, metrics)
against the embedded API server."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cluster_support import (
    TokenAuthority,
    client_for,
    controller_config,
    embedded_server,
    eventually,
    loopback_controller_pod,
    serve,
    trusting,
)
from lightkube.config.kubeconfig import KubeConfig

from kubetrain.cli.cmd_controller import admission_rules
from kubetrain.controller.cluster import ClusterController, ensure_webhook_cert
from kubetrain.controller.deploy import install_objects
from kubetrain.controller.pki import ensure_serving_cert
from kubetrain.controller.statusserver import StatusServer, TokenReviewVerifier, status_audience
from kubetrain.controller.webhook import admission_review
from kubetrain.kube.client import ApiError, KubeClient, connect
from kubetrain.local.apiserver import ApiServer, ResourceDef, kubeconfig_dict
from kubetrain.testing import make_trainjob

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"
REPORT = {
    "trainerStatus": {
        "progressPercentage": 40,
        "estimatedRemainingSeconds": 10,
        "metrics": [{"name": "loss", "value": "0.5"}],
        "lastUpdatedTime": "2026-01-01T00:00:00Z",
    }
}


def _route(namespace: str, name: str) -> str:
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


@pytest.fixture
async def authority() -> AsyncIterator[tuple[TokenAuthority, KubeClient]]:
    auth = TokenAuthority()
    runner, url = await serve(auth.app())
    client = connect(KubeConfig.from_dict(kubeconfig_dict(url, None)))
    try:
        yield auth, client
    finally:
        await client.close()
        await runner.cleanup()


async def test_status_server_accepts_only_the_jobs_own_token(
    kube: KubeClient, authority: tuple[TokenAuthority, KubeClient], tmp_path: Path
) -> None:
    auth, review_client = authority
    for name in ("a", "b"):
        await kube.create(TRAINER, "trainjobs", make_trainjob(name).obj())
    cert = ensure_serving_cert(tmp_path / "pki", ["status.test"], ["127.0.0.1"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    server = StatusServer(kube, TokenReviewVerifier(review_client, cache_s=0))
    port = await server.start("127.0.0.1", 0, context)
    url = f"https://127.0.0.1:{port}" + _route("default", "a")
    tokens = {
        "good": auth.mint("default", status_audience("default", "a")),
        "wrong audience": auth.mint("default", "https://kubernetes.default.svc"),
        "expired": auth.mint("default", status_audience("default", "a"), ttl=-5),
        "other job": auth.mint("default", status_audience("default", "b")),
        "other namespace": auth.mint("elsewhere", status_audience("default", "a")),
    }
    codes: dict[str, int] = {}
    try:
        async with aiohttp.ClientSession() as http:
            for what, token in [*tokens.items(), ("no token", "")]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with http.post(
                    url, json=REPORT, headers=headers, ssl=trusting(cert.ca_pem)
                ) as resp:
                    codes[what] = resp.status
                    if resp.status == 403:
                        assert (await resp.json())["reason"] == "Forbidden"
    finally:
        await server.stop()
    assert codes == {
        "good": 200,
        "wrong audience": 403,
        "expired": 403,
        "other job": 403,
        "other namespace": 403,
        "no token": 403,
    }
    assert auth.reviews == 5  # every bearer token went through a real TokenReview
    job = await kube.get(TRAINER, "trainjobs", "a", namespace="default")
    assert job["status"]["trainerStatus"]["progressPercentage"] == 40
    other = await kube.get(TRAINER, "trainjobs", "b", namespace="default")
    assert "trainerStatus" not in (other.get("status") or {})


# --- the process assembly ------------------------------------------------------------------------

WEBHOOK_KINDS = (
    ResourceDef(
        "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations", False, "validatingwebhookconfiguration",
    ),
    ResourceDef(
        "admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations", False, "mutatingwebhookconfiguration",
    ),
)  # fmt: skip


@pytest.fixture
async def cluster_server(tmp_path: Path, crds: list[Obj]) -> AsyncIterator[ApiServer]:
    """An embedded API server that also stores webhook configurations (as a cluster would)."""
    async with embedded_server(tmp_path, crds, resources=WEBHOOK_KINDS) as server:
        yield server


async def test_controller_process_end_to_end(cluster_server: ApiServer, tmp_path: Path) -> None:
    kube = client_for(cluster_server)
    for obj in install_objects("manager"):
        if obj["kind"].endswith("WebhookConfiguration") or obj["kind"] == "Service":
            await kube.apply(obj["kind"].lower() + "s", obj, field_manager="kubectl")
    process = ClusterController(
        client_for(cluster_server), controller_config(tmp_path), admission_rules()
    )
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(stop))
    try:
        async with aiohttp.ClientSession() as http:

            async def get(
                port: int, path: str, tls: ssl.SSLContext | None = None
            ) -> tuple[int, str]:
                url = f"{'https' if tls else 'http'}://127.0.0.1:{port}{path}"
                async with http.get(url, ssl=tls if tls else False) as resp:
                    return resp.status, await resp.text()

            async def listening() -> bool:
                return process.health_port > 0

            await eventually(listening)
            await eventually(lambda: _ok(get(process.health_port, "/readyz")))
            assert (await get(process.health_port, "/healthz"))[0] == 200

            # The certificate lives in the Secret, and its CA is in both configurations.
            secret = await kube.get(
                "v1", "secrets", "kubeflow-trainer-webhook-cert", namespace="kubeflow-system"
            )
            assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
            ca_pem = base64.b64decode(secret["data"]["ca.crt"]).decode()

            async def injected() -> bool:
                bundles = []
                for plural, name in (
                    ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org"),
                    ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"),
                ):
                    cfg = await kube.get("admissionregistration.k8s.io/v1", plural, name)
                    bundles += [w["clientConfig"].get("caBundle") for w in cfg["webhooks"]]
                return set(bundles) == {base64.b64encode(ca_pem.encode()).decode()}

            await eventually(injected)
            # The API server calls the webhooks through the Service, at the controller's pod.
            await loopback_controller_pod(kube, process.webhook_port)

            # The webhook answers over TLS that verifies against the injected CA, for the
            # Service's DNS name, exactly as a kube-apiserver would check it.
            verify = ssl.create_default_context(cadata=ca_pem)
            review = admission_review(make_trainjob("via-hook").obj())
            async with http.post(
                f"https://127.0.0.1:{process.webhook_port}/validate-trainer-kubeflow-org-v1alpha1-trainjob",
                json=review,
                ssl=verify,
                server_hostname="kubeflow-trainer-controller-manager.kubeflow-system.svc",
            ) as resp:
                assert (await resp.json())["response"]["allowed"] is True

            # It reconciles: a TrainJob gets its JobSet, and the metrics say so.
            await kube.create(TRAINER, "trainjobs", make_trainjob("one").obj())

            async def jobset() -> Obj | None:
                items, _ = await kube.list(
                    "jobset.x-k8s.io/v1alpha2", "jobsets", namespace="default"
                )
                return items[0] if items else None

            await eventually(jobset)
            tls = trusting(ca_pem)
            wanted = (
                'kubetrain_reconcile_total{kind="TrainJob",outcome="success"}',
                "kubetrain_reconcile_seconds_count",
                "kubetrain_workqueue_depth",
                "kubetrain_leader 1",
                # Its server-side applies, counted as client-go counts them.
                'rest_client_requests_total{code="200",host=',
                'method="PATCH"}',
                # One review posted above, one from the API server creating "one".
                'kubetrain_admission_total{webhook="validator.trainjob.trainer.kubeflow.org",verdict="allowed"} 2',
            )

            # The JobSet shows before its reconcile has ended and been counted: read until it is.
            async def counted() -> bool:
                status, text = await get(process.metrics_port, "/metrics", tls)
                return status == 200 and all(name in text for name in wanted)

            with contextlib.suppress(AssertionError):
                await eventually(counted)
            status, text = await get(process.metrics_port, "/metrics", tls)
            assert status == 200
            for name in wanted:
                assert name in text, name
            lease = await kube.get(
                "coordination.k8s.io/v1",
                "leases",
                "trainer.kubeflow.org",
                namespace="kubeflow-system",
            )
            assert lease["spec"]["holderIdentity"]
            assert process.status_port > 0  # TrainJobStatus is on by default

            # `kubectl apply` of the install manifest wipes caBundle: it is put back.
            cfg = await kube.get(
                "admissionregistration.k8s.io/v1",
                "mutatingwebhookconfigurations",
                "defaulter.trainer.kubeflow.org",
            )
            for w in cfg["webhooks"]:
                w["clientConfig"].pop("caBundle", None)
            await kube.replace(
                "admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", cfg
            )
            await eventually(injected)
            # The API server calls the webhooks through the Service, at the controller's pod.
            await loopback_controller_pod(kube, process.webhook_port)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await process.client.close()
        await kube.close()


async def _ok(call: Any) -> bool:
    try:
        status, _ = await call
    except aiohttp.ClientError:
        return False
    return bool(status == 200)


async def test_replicas_share_one_certificate(kube: KubeClient, tmp_path: Path) -> None:
    """Two replicas racing for the Secret end with the same CA and the same serving cert."""
    first, second = await asyncio.gather(
        *(
            ensure_webhook_cert(
                kube,
                namespace="kubeflow-system",
                secret="kubeflow-trainer-webhook-cert",
                service="kubeflow-trainer-controller-manager",
                cert_dir=tmp_path / name,
            )
            for name in ("a", "b")
        )
    )
    assert first.ca_pem == second.ca_pem
    assert first.cert_file.read_bytes() == second.cert_file.read_bytes()
    # A restart reuses it: pods keep trusting the CA that went into their tls-config.
    again = await ensure_webhook_cert(
        kube,
        namespace="kubeflow-system",
        secret="kubeflow-trainer-webhook-cert",
        service="kubeflow-trainer-controller-manager",
        cert_dir=tmp_path / "c",
    )
    assert again.ca_pem == first.ca_pem


def test_config_flags_override_the_file(tmp_path: Path) -> None:
    import argparse

    from kubetrain.cli import cmd_controller

    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"
        "leaderElection: {leaseDuration: 1m30s, renewDeadline: 500ms, retryPeriod: 0.1}\n"
        "featureGates: {TrainJobStatus: false}\nmetrics: {bindAddress: '0'}\n"
    )
    parser = argparse.ArgumentParser()
    cmd_controller.add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(path), "--feature-gates", "TrainJobStatus=true", "--namespace", "team-a",
         "--operator-namespace", "ops", "--no-leader-elect"]
    )  # fmt: skip
    config = cmd_controller.config_from_args(args)
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (90, 0.5, 0.1)
    assert config.gates.trainjob_status is True
    assert (config.namespace, config.operator_namespace, config.leader_elect) == (
        "team-a",
        "ops",
        False,
    )
    assert config.metrics_port == -1
    from kubetrain.controller.cluster import ConfigError

    bad = replace(config, renew_deadline=200.0)
    with pytest.raises(ConfigError):
        bad.validate()


async def test_cert_manager_mode_serves_mounted_files_and_reloads_them(
    cluster_server: ApiServer, tmp_path: Path
) -> None:
    """With certManagement off the controller uses the mounted Secret's files, creates no Secret,
    and picks up a renewed certificate without a restart."""
    import shutil

    dns = ["kubeflow-trainer-controller-manager.kubeflow-system.svc"]
    mounted = tmp_path / "mounted"
    first = ensure_serving_cert(mounted, dns, [])
    config = replace(
        controller_config(tmp_path), cert_management=False, cert_dir=mounted, ca_refresh_s=0.1
    )
    process = ClusterController(client_for(cluster_server), config, admission_rules())
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(stop))

    async def served_ca(ca_pem: str) -> bool:
        context = ssl.create_default_context(cadata=ca_pem)
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", process.webhook_port, ssl=context, server_hostname=dns[0]
            )
        except (ssl.SSLError, OSError):
            return False
        writer.close()
        return True

    try:
        await eventually(lambda: served_ca(first.ca_pem))
        with pytest.raises(ApiError) as missing:
            await kube_get_secret(cluster_server)
        assert missing.value.not_found  # cert-manager owns the Secret, not the controller
        # cert-manager renews: new files in place (here, from another CA).
        renewed = ensure_serving_cert(tmp_path / "renewed", dns, [])
        await asyncio.sleep(0.05)  # a different mtime
        shutil.copy(renewed.cert_file, mounted / "tls.crt")
        shutil.copy(renewed.key_file, mounted / "tls.key")
        await eventually(lambda: served_ca(renewed.ca_pem))
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await process.client.close()


async def kube_get_secret(server: ApiServer) -> Obj:
    kube = client_for(server)
    try:
        return await kube.get(
            "v1", "secrets", "kubeflow-trainer-webhook-cert", namespace="kubeflow-system"
        )
    finally:
        await kube.close()


async def test_status_server_with_the_embedded_token_request_and_review(
    tmp_path: Path, crds: list[Obj]
) -> None:
    """Tokens minted by TokenRequest on the embedded API server (as the kubelet gets them for a
    projected volume) and reviewed by its TokenReview: the same verdicts as on a cluster."""
    from kubetrain.local.tokens import TokenAuthority as EmbeddedAuthority

    now = [1_800_000_000.0]
    authority = EmbeddedAuthority.for_home(tmp_path / "home")
    authority.clock = lambda: now[0]
    server = ApiServer(
        tmp_path / "home", crds=crds, routes=authority.routes(), in_memory=True, tls=True
    )
    authority.attach(server.reader)
    await server.start()
    kube = client_for(server)
    cert = ensure_serving_cert(tmp_path / "pki", ["status.test"], ["127.0.0.1"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    status_server = StatusServer(kube, TokenReviewVerifier(kube, cache_s=0), min_interval_s=0)
    port = await status_server.start("127.0.0.1", 0, context)
    assert server.ca_pem is not None
    api_tls = trusting(server.ca_pem.decode())
    try:
        await kube.create(
            "v1",
            "namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}},
        )
        for ns in ("default", "other"):
            sa = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "runner", "namespace": ns},
            }
            await kube.create("v1", "serviceaccounts", sa)
        from kubetrain.runtime.defaults import default_runtimes

        await kube.create(TRAINER, "clustertrainingruntimes", default_runtimes()[0])
        for name in ("a", "b"):
            await kube.create(TRAINER, "trainjobs", make_trainjob(name).obj())

        async with aiohttp.ClientSession() as http:

            async def token(namespace: str, audience: str) -> str:
                url = f"{server.url}/api/v1/namespaces/{namespace}/serviceaccounts/runner/token"
                body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                        "spec": {"audiences": [audience], "expirationSeconds": 3600}}  # fmt: skip
                headers = {"Authorization": f"Bearer {server.token}"}
                async with http.post(url, json=body, headers=headers, ssl=api_tls) as resp:
                    assert resp.status == 201, await resp.text()
                    return str((await resp.json())["status"]["token"])

            async def report(bearer: str) -> int:
                url = f"https://127.0.0.1:{port}" + _route("default", "a")
                headers = {"Authorization": f"Bearer {bearer}"}
                async with http.post(
                    url, json=REPORT, headers=headers, ssl=trusting(cert.ca_pem)
                ) as resp:
                    return resp.status

            good = await token("default", status_audience("default", "a"))
            codes = {
                "good": await report(good),
                "wrong audience": await report(
                    await token("default", "https://kubernetes.default.svc")
                ),
                "other job": await report(await token("default", status_audience("default", "b"))),
                "other namespace": await report(
                    await token("other", status_audience("default", "a"))
                ),
            }
            now[0] += 3601  # the good token has expired
            codes["expired"] = await report(good)
        assert codes == {
            "good": 200,
            "wrong audience": 403,
            "other job": 403,
            "other namespace": 403,
            "expired": 403,
        }
        assert authority.reviewed == 5
        job = await kube.get(TRAINER, "trainjobs", "a", namespace="default")
        assert job["status"]["trainerStatus"]["progressPercentage"] == 40
    finally:
        await status_server.stop()
        await kube.close()
        await server.close()
