"""The progress tests' plane: the embedded API server with TokenRequest/TokenReview and the status server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api.types import Obj
from kubetrain.controller.statusserver import StatusServer, status_audience
from kubetrain.kube.client import KubeClient
from kubetrain.local.apiserver import ApiServer
from kubetrain.local.history import MetricsHistory
from kubetrain.local.tokens import TokenAuthority

TRAINER = "trainer.kubeflow.org/v1alpha1"
NAMESPACE = "default"


@dataclass
class Plane:
    server: ApiServer
    kube: KubeClient
    status: StatusServer
    url: str
    ca_file: Path
    history: MetricsHistory
    home: Path
    authority: TokenAuthority
    jobs: dict[str, Obj] = field(default_factory=dict)

    def status_url(self, name: str, namespace: str = NAMESPACE) -> str:
        return f"{self.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"

    async def trainjob(self, name: str, namespace: str = NAMESPACE) -> Obj:
        return await self.kube.get(TRAINER, "trainjobs", name, namespace=namespace)

    async def create_job(self, name: str, namespace: str = NAMESPACE) -> Obj:
        job = await self.kube.create(
            TRAINER,
            "trainjobs",
            {
                "apiVersion": TRAINER,
                "kind": "TrainJob",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"runtimeRef": {"name": "torch-distributed"}},
            },
        )
        self.jobs[name] = job
        return job

    async def create_pod(self, name: str, namespace: str = NAMESPACE, sa: str = "default") -> Obj:
        return await self.kube.create(
            "v1",
            "pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "serviceAccountName": sa,
                    "containers": [{"name": "node", "image": "python"}],
                },
            },
        )

    async def token_for(
        self,
        job: str,
        *,
        pod: Obj | None = None,
        namespace: str = NAMESPACE,
        audience: str | None = None,
        expiration_s: int = 3600,
    ) -> str:
        """A token from TokenRequest, as the executor gets one for a projected volume."""
        spec: dict[str, Any] = {
            "audiences": [audience or status_audience(namespace, job)],
            "expirationSeconds": expiration_s,
        }
        if pod is not None:
            meta = pod["metadata"]
            spec["boundObjectRef"] = {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": meta["name"],
                "uid": meta["uid"],
            }
        answer = await self.kube.create(
            "v1",
            "serviceaccounts/default/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {"namespace": namespace},
                "spec": spec,
            },
        )
        return str(answer["status"]["token"])
