"""TrainJobStatus (feature gate): status-server env vars, projected token + CA volume, and the
``TJ-tls-config`` ConfigMap (trainer v2.3.0 pkg/statusserver/). Registered only with the gate on.
"""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.framework import BuildContext, RenderError, object_meta
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, env_value, upsert_env, upsert_volume, upsert_volume_mount

__all__ = ["TrainJobStatus", "new", "status_path", "token_audience"]

MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
VOLUME_NAME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600


def status_path(namespace: str, name: str) -> str:
    """The status server route for one TrainJob."""
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience a pod's projected token must carry."""
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


class TrainJobStatus:
    """Every TrainJob, whatever its runtime, gets the progress plumbing."""

    name = "trainjobstatus"

    def __init__(self, env: Environment) -> None:
        self.env = env

    def enforce_ml_policy(self, info: RuntimeInfo, job: Obj) -> None:
        ps = info.trainer_pod_set()
        if ps is None:
            return
        ns, name = info.trainjob_namespace, info.trainjob_name
        url = self.env.status_server_base_url + status_path(ns, name)
        for c in ps.containers:
            if not isinstance(c, dict):
                continue
            upsert_env(
                c,
                env_value("KUBEFLOW_TRAINER_SERVER_URL", url),
                env_value("KUBEFLOW_TRAINER_SERVER_CA_CERT", f"{MOUNT_PATH}/ca.crt"),
                env_value("KUBEFLOW_TRAINER_SERVER_TOKEN", f"{MOUNT_PATH}/token"),
            )
            upsert_volume_mount(c, {"name": VOLUME_NAME, "mountPath": MOUNT_PATH, "readOnly": True})
        upsert_volume(
            ps.pod_spec,
            {
                "name": VOLUME_NAME,
                "projected": {
                    "sources": [
                        {
                            "serviceAccountToken": {
                                "audience": token_audience(ns, name),
                                "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                                "path": "token",
                            }
                        },
                        {
                            "configMap": {
                                "name": f"{name}-tls-config",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ]
                },
            },
        )

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        if not ctx.env.ca_pem:
            raise RenderError(FieldError("", "failed to find status server ca.crt in tls secret"))
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(info, f"{info.trainjob_name}-tls-config"),
                "data": {"ca.crt": ctx.env.ca_pem},
            }
        ]


def new(gates: FeatureGates, env: Environment) -> TrainJobStatus | None:
    """Only with the TrainJobStatus gate on."""
    return TrainJobStatus(env) if gates.trainjob_status else None
