"""A pod's way to the API server, as a cluster gives it: the service-account mount and env.

Kubernetes' ServiceAccount admission adds a projected ``kube-api-access-*`` volume (a token of
the pod's service account, the cluster CA from the ``kube-root-ca.crt`` ConfigMap, the
namespace) at ``/var/run/secrets/kubernetes.io/serviceaccount`` to every container, and the
kubelet sets ``KUBERNETES_SERVICE_HOST``/``PORT``. In-cluster clients (the cache initializer,
the official Python client, lightkube) need exactly these. The executor adds them to the copy
of the pod it runs, not to the stored Pod, unless the pod opts out
(``automountServiceAccountToken: false``) or already mounts that path.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api.access import as_list, dicts, obj_at
from kubetrain.api.types import Obj

__all__ = ["API_HOST", "MOUNT_PATH", "ROOT_CA", "VOLUME", "with_api_access"]

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME = "kube-api-access-kubetrain"
ROOT_CA = "kube-root-ca.crt"
# A name the API server's certificate covers (a cluster sets the Service's IP; TLS to an IP
# would need that IP in the certificate, and pods here reach the server by name).
API_HOST = "kubernetes.default.svc"
# kube-apiserver's default for this volume's token.
_EXPIRATION_S = 3607


def _mounts_it(container: Obj) -> bool:
    return any(m.get("mountPath") == MOUNT_PATH for m in dicts(container.get("volumeMounts")))


def with_api_access(pod: Obj, port: int) -> Obj:
    """``pod`` with the service-account volume, mounts and env (``pod`` itself when it opts out)."""
    spec = obj_at(pod, "spec")
    containers = [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]
    if spec.get("automountServiceAccountToken") is False or any(map(_mounts_it, containers)):
        return pod
    out = copy.deepcopy(pod)
    spec = out["spec"]
    volume: dict[str, Any] = {
        "name": VOLUME,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": _EXPIRATION_S, "path": "token"}},
                {"configMap": {"name": ROOT_CA, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }
    spec["volumes"] = [*as_list(spec.get("volumes")), volume]
    env = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": API_HOST},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(port)},
        {"name": "KUBERNETES_SERVICE_PORT_HTTPS", "value": str(port)},
    ]
    for c in [*dicts(spec.get("initContainers")), *dicts(spec.get("containers"))]:
        mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
        c["volumeMounts"] = [*as_list(c.get("volumeMounts")), mount]
        names = {e.get("name") for e in dicts(c.get("env"))}
        c["env"] = [*as_list(c.get("env")), *(e for e in env if e["name"] not in names)]
    return out
