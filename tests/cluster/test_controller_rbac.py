"""``kubetrain controller`` under its own ServiceAccount: the manifests' RBAC is enough, and a
rule missing from its ClusterRole shows as the API server's 403.

The API server enforces RBAC and calls the installed webhooks (through the Service, at a stored
pod on loopback); the controller runs in-process with a token from TokenRequest, so every call
it makes is authorised as it would be on a cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import client_for, controller_config, eventually, loopback_controller_pod
from lightkube.config.kubeconfig import KubeConfig

from kubetrain.cli.cmd_controller import admission_rules
from kubetrain.controller.cluster import ClusterController
from kubetrain.controller.deploy import NAME, NAMESPACE, install_objects
from kubetrain.kube.client import ApiError, KubeClient, connect
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.apiserver.admission import PermissiveAdmission
from kubetrain.local.apiserver.rbac import user_from_info
from kubetrain.local.tokens import TokenAuthority
from kubetrain.testing import make_trainjob

Obj = dict[str, Any]
TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture
async def server(tmp_path: Path, crds: list[Obj]) -> AsyncIterator[ApiServer]:
    from kubetrain.runtime.defaults import default_runtimes

    authority = TokenAuthority.for_home(tmp_path)
    server = ApiServer(
        tmp_path / "home",
        crds=crds,
        admission=PermissiveAdmission(),
        seed_objects=default_runtimes,
        in_memory=True,
        routes=authority.routes(),
        authenticator=lambda token: user_from_info(authority.authenticate(token)),
    )
    authority.attach(server.reader)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def _install(admin: KubeClient, server: ApiServer, drop_rule: str | None) -> KubeClient:
    """The manifests' objects a cluster would hold before the Deployment's pod starts, then a
    client holding the controller ServiceAccount's token."""
    for obj in install_objects("manager"):
        if obj["kind"] in ("Namespace", "CustomResourceDefinition", "Deployment"):
            continue
        if obj["kind"] == "ClusterRole" and drop_rule:
            obj["rules"] = [r for r in obj["rules"] if drop_rule not in r["resources"]]
        await admin.apply(obj["kind"].lower() + "s", obj, field_manager="kubectl")
    answer = await admin.create(
        "v1",
        f"serviceaccounts/{NAME}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "metadata": {"namespace": NAMESPACE}, "spec": {}},
    )  # fmt: skip
    config = server.kubeconfig()
    config["users"][0]["user"] = {"token": answer["status"]["token"]}
    return connect(KubeConfig.from_dict(config))


@pytest.mark.parametrize(
    ("drop_rule", "refusal"),
    [
        (None, None),
        (
            "jobsets",
            # Its JobSet informer cannot list: the controller never starts reconciling.
            "jobsets.jobset.x-k8s.io is forbidden: User "
            f'"system:serviceaccount:{NAMESPACE}:{NAME}" cannot list resource "jobsets" '
            'in API group "jobset.x-k8s.io" in the namespace "default"',
        ),
    ],
    ids=[
        "the manifests' RBAC is all the controller needs to run a TrainJob",
        "without its JobSet rule the controller meets the API server's 403",
    ],
)
async def test_the_controller_under_its_service_account(
    server: ApiServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    drop_rule: str | None,
    refusal: str | None,
) -> None:
    admin = client_for(server)
    controller_client = await _install(admin, server, drop_rule)
    process = ClusterController(controller_client, controller_config(tmp_path), admission_rules())
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(stop))
    caplog.set_level(logging.WARNING)
    try:

        async def serving() -> bool:
            return process.webhook_port > 0

        await eventually(serving, timeout=20.0)
        await loopback_controller_pod(admin, process.webhook_port)

        async def created() -> bool:
            try:
                await admin.create(TRAINER, "trainjobs", make_trainjob("rbac-job").obj())
            except ApiError as err:  # the caBundle is not injected yet: TLS refused
                return err.code != 500
            return True

        await eventually(created, timeout=20.0)
        if refusal is None:

            async def jobset() -> bool:
                try:
                    await admin.get(JOBSET, "jobsets", "rbac-job", namespace="default")
                except ApiError:
                    return False
                return True

            await eventually(jobset, timeout=20.0)
            assert "is forbidden" not in caplog.text
        else:

            async def refused() -> bool:
                return refusal in caplog.text

            await eventually(refused, timeout=20.0)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await controller_client.close()
        await admin.close()
