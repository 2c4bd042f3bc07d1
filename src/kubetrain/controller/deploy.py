"""The Kubernetes install of the controller: every object, and the source of ``manifests/``.

Every object of the install is built here, from the project's own data (``crd_manifests()``,
``default_runtimes()``, the webhook table of ``kubetrain.controller.webhook``), so the installed
package can print the manifest without the repository. ``manifests/`` (kustomize) is generated
from the same functions (``kubetrain install --write-manifests manifests``); a test fails when
the two drift apart, and another checks that ``kubectl kustomize`` renders the same objects.

Overlays: ``manager`` (controller, CRDs, RBAC, webhooks, self-managed certificates),
``runtimes`` (the default ClusterTrainingRuntimes), ``cert-manager`` (the manager with
cert-manager issuing the webhook certificate), and ``default`` = manager + runtimes, which is
also what ``kubectl kustomize manifests/`` renders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubetrain.controller.cluster import ControllerConfig
from kubetrain.kube import kinds as K
from kubetrain.kube.kinds import Kind
from kubetrain.runtime.defaults import PUBLIC_CONFIG_MAP

__all__ = [
    "IMAGE",
    "NAMESPACE",
    "OVERLAYS",
    "controller_configuration",
    "install_objects",
    "manifest_files",
    "write_manifests",
]

Obj = dict[str, Any]

# Names and ports are the controller's own defaults, so the install and the process agree.
_DEFAULTS = ControllerConfig()
NAMESPACE = _DEFAULTS.operator_namespace
PUBLIC = PUBLIC_CONFIG_MAP
NAME = _DEFAULTS.webhook_service  # Deployment, Service and ServiceAccount
WEBHOOK_SECRET = _DEFAULTS.webhook_secret
CONFIG_MAP = "kubeflow-trainer-config"
CONFIG_KEY = "controller_manager_config.yaml"
CONFIG_DIR = "/etc/kubetrain"
CERT_DIR = str(_DEFAULTS.cert_dir)
WEBHOOK_PORT = _DEFAULTS.webhook_port
METRICS_PORT = _DEFAULTS.metrics_port
HEALTH_PORT = _DEFAULTS.health_port
STATUS_PORT = _DEFAULTS.status_port
IMAGE = "ghcr.io/kubetrain/controller"
LABELS = {"app.kubernetes.io/name": "kubetrain", "app.kubernetes.io/component": "controller"}
_GROUP = "trainer.kubeflow.org"


def _image() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tag = version("kubetrain")
    except PackageNotFoundError:  # running from a source tree without metadata
        tag = "latest"
    return f"{IMAGE}:v{tag}"


def _meta(name: str, namespace: str | None = NAMESPACE, **extra: Any) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


# --- the manager ----------------------------------------------------------------------------------


def controller_configuration(*, cert_management: bool = True) -> Obj:
    """Upstream's ``Configuration`` with its shipped values (trainer v2.3.0 manifests/base/manager/controller_manager_config.yaml), TrainJobStatus on."""
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {
            "healthProbeBindAddress": f":{HEALTH_PORT}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "metrics": {"bindAddress": f":{METRICS_PORT}", "secureServing": True},
        "webhook": {"port": WEBHOOK_PORT},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": "trainer.kubeflow.org",
            "leaseDuration": "15s",
            "renewDeadline": "10s",
            "retryPeriod": "2s",
        },
        "controller": {
            "groupKindConcurrency": {
                "TrainJob.trainer.kubeflow.org": 5,
                "TrainingRuntime.trainer.kubeflow.org": 1,
                "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
            }
        },
        "certManagement": {
            "enable": cert_management,
            "webhookServiceName": NAME,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        "statusServer": {"port": STATUS_PORT, "qps": 5, "burst": 10},
        "featureGates": {"TrainJobStatus": True},
    }


def _config_map(cert_management: bool = True) -> Obj:
    from kubetrain.api.dump import dump_yaml

    text = dump_yaml(controller_configuration(cert_management=cert_management))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(CONFIG_MAP),
        "data": {CONFIG_KEY: text},
    }


def _rule(
    kinds: list[Kind], verbs: list[str], names: list[str] | None = None, subresource: str = ""
) -> Obj:
    """One PolicyRule over ``kinds`` (their groups and plurals from the kind table)."""
    groups = list(dict.fromkeys(k.group for k in kinds))
    plurals = list(
        dict.fromkeys(k.plural + (f"/{subresource}" if subresource else "") for k in kinds)
    )
    rule: Obj = {"apiGroups": groups, "resources": plurals}
    if names:
        rule["resourceNames"] = names
    rule["verbs"] = verbs
    return rule


def _cluster_role() -> Obj:
    """Exactly what the controller process calls, cluster-wide (trainer v2.3.0 manifests/base/rbac/role.yaml, trimmed to it).

    Why each verb: informers list+watch; ``get`` for objects read on demand; server-side apply
    is ``patch`` (plus ``create`` where it creates); the JobSet is deleted at the active
    deadline; ``trainjobs/finalizers`` lets children carry blockOwnerDeletion owner references.
    """
    from kubetrain.controller.webhook import MUTATING_CONFIGURATION, VALIDATING_CONFIGURATION

    apply = ["create", "get", "patch"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(NAME, None),
        "rules": [
            _rule([K.CONFIGMAP], ["create", "get", "list", "patch", "watch"]),
            _rule([K.SECRET], apply),
            _rule([K.EVENT], ["create", "patch"]),
            _rule([K.JOBSET], ["create", "delete", "get", "list", "patch", "watch"]),
            _rule([K.TRAINJOB], ["get", "list", "watch"]),
            _rule([K.TRAINJOB], ["get", "patch"], subresource="status"),
            _rule([K.TRAINJOB], ["update"], subresource="finalizers"),
            _rule(
                [K.TRAINING_RUNTIME, K.CLUSTER_TRAINING_RUNTIME], ["get", "list", "patch", "watch"]
            ),
            _rule([K.POD_GROUP, K.VOLCANO_POD_GROUP], apply),
            _rule([K.PRIORITY_CLASS], ["list"]),
            _rule([K.TOKEN_REVIEW], ["create"]),
            _rule(
                [K.VALIDATING_WEBHOOK_CONFIGURATION], ["get", "update"], [VALIDATING_CONFIGURATION]
            ),
            _rule([K.MUTATING_WEBHOOK_CONFIGURATION], ["get", "update"], [MUTATING_CONFIGURATION]),
        ],
    }


def _namespaced_role() -> Obj:
    """In the operator namespace only: the leader-election Lease and the webhook Secret."""
    lease = ControllerConfig().lease_name
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(NAME),
        "rules": [
            _rule([K.LEASE], ["create"]),
            _rule([K.LEASE], ["get", "update"], [lease]),
            _rule([K.SECRET], ["update"], [WEBHOOK_SECRET]),
        ],
    }


def _binding(
    kind: str, role_kind: str, name: str, subjects: list[Obj], namespace: str | None
) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subjects,
    }


def _public() -> list[Obj]:
    """The ConfigMap the official SDK reads, readable by every authenticated user."""
    from kubetrain.runtime.defaults import public_config_map

    public = public_config_map()
    public["metadata"] = _meta(PUBLIC)
    return [
        public,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(PUBLIC),
            "rules": [_rule([K.CONFIGMAP], ["get", "list", "watch"], [PUBLIC])],
        },
        _binding(
            "RoleBinding",
            "Role",
            PUBLIC,
            [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    "name": "system:authenticated",
                }
            ],
            NAMESPACE,
        ),
    ]


def _port(name: str, port: int) -> Obj:
    return {"name": name, "containerPort": port, "protocol": "TCP"}


def _probe(path: str, delay: int) -> Obj:
    return {
        "httpGet": {"path": path, "port": "health"},
        "initialDelaySeconds": delay,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }


def _deployment() -> Obj:
    container: Obj = {
        "name": "manager",
        "image": _image(),
        "imagePullPolicy": "IfNotPresent",
        "args": [f"--config={CONFIG_DIR}/{CONFIG_KEY}"],
        "ports": [
            _port("webhook-server", WEBHOOK_PORT),
            _port("metrics", METRICS_PORT),
            _port("status-server", STATUS_PORT),
            _port("health", HEALTH_PORT),
        ],
        "livenessProbe": _probe("/healthz", 15),
        "readinessProbe": _probe("/readyz", 5),
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            # No CPU limit: throttling a controller only makes it slow, never safe.
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            # The only writable path: the serving certificate is written here at start-up.
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME, labels=dict(LABELS)),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": NAME,
                    "terminationGracePeriodSeconds": 10,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": CONFIG_MAP}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def _service() -> Obj:
    def port(name: str, port: int, target: str) -> Obj:
        return {"name": name, "port": port, "protocol": "TCP", "targetPort": target}

    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(NAME, labels=dict(LABELS)),
        "spec": {
            "selector": dict(LABELS),
            "ports": [
                port("monitoring-port", METRICS_PORT, "metrics"),
                port("webhook-server", 443, "webhook-server"),
                port("status-server", STATUS_PORT, "status-server"),
            ],
        },
    }


def _webhook_configurations(annotations: dict[str, str] | None = None) -> list[Obj]:
    from kubetrain.controller.webhook import (
        MUTATING_CONFIGURATION,
        VALIDATING_CONFIGURATION,
        WEBHOOKS,
    )

    def entry(webhook: Any) -> Obj:
        item: Obj = {
            "name": webhook.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {"name": NAME, "namespace": NAMESPACE, "path": webhook.path, "port": 443}
            },
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "rules": [
                {
                    "apiGroups": [_GROUP],
                    "apiVersions": ["v1alpha1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [webhook.kind.plural],
                }
            ],
        }
        if webhook.runtime:
            # v2.3: the shipped runtimes carry this label so they apply before the webhook runs.
            item["objectSelector"] = {
                "matchExpressions": [
                    {
                        "key": "trainer.kubeflow.org/webhook-validation",
                        "operator": "NotIn",
                        "values": ["disabled"],
                    }
                ]
            }
        return item

    extra = {"annotations": dict(annotations)} if annotations else {}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": _meta(MUTATING_CONFIGURATION, None, **extra),
            "webhooks": [entry(w) for w in WEBHOOKS if w.mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _meta(VALIDATING_CONFIGURATION, None, **extra),
            "webhooks": [entry(w) for w in WEBHOOKS if not w.mutating],
        },
    ]


def _crds() -> list[Obj]:
    from kubetrain.api.schema import crd_manifests

    # JobSet is a prerequisite installed from its own release, never by kubetrain.
    return [c for c in crd_manifests() if c["spec"]["group"] == _GROUP]


def _runtimes() -> list[Obj]:
    from kubetrain.runtime.defaults import default_runtimes

    return default_runtimes()


# --- overlays and files ---------------------------------------------------------------------------


# path of each generated file under manifests/ → the objects in it.
def _base_files(cert_management: bool = True) -> dict[str, list[Obj]]:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME)}
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    files: dict[str, list[Obj]] = {
        "base/namespace.yaml": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE, None)}
        ],
    }
    for crd in _crds():
        files[f"base/crds/{crd['metadata']['name']}.yaml"] = [crd]
    files.update(
        {
            "base/rbac/service_account.yaml": [sa],
            "base/rbac/cluster_role.yaml": [
                _cluster_role(),
                _binding("ClusterRoleBinding", "ClusterRole", NAME, subject, None),
            ],
            "base/rbac/role.yaml": [
                _namespaced_role(),
                _binding("RoleBinding", "Role", NAME, subject, NAMESPACE),
            ],
            "base/public/public.yaml": _public(),
            "base/manager/config.yaml": [_config_map(cert_management)],
            "base/manager/manager.yaml": [_deployment(), _service()],
            "base/manager/webhook_secret.yaml": [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": _meta(WEBHOOK_SECRET),
                    "type": "Opaque",
                }
            ],
            "base/webhook/webhooks.yaml": _webhook_configurations(),
        }
    )
    return files


def _runtime_files() -> dict[str, list[Obj]]:
    return {f"overlays/runtimes/{r['metadata']['name']}.yaml": [r] for r in _runtimes()}


_SELF_SIGNED = "kubeflow-trainer-selfsigned"
_CA = "kubeflow-trainer-ca"


def _cert_manager_objects() -> list[Obj]:
    """A long-lived CA (self-signed) that issues the serving certificate.

    The serving certificate's Secret then carries that CA as ``ca.crt``, which stays the same
    when cert-manager renews the serving certificate, so TrainJob pods that received the CA keep
    trusting the status server.
    """
    dns = [f"{NAME}.{NAMESPACE}.svc", f"{NAME}.{NAMESPACE}.svc.cluster.local"]

    def issuer(name: str, spec: Obj) -> Obj:
        return {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": _meta(name),
            "spec": spec,
        }

    def certificate(name: str, spec: Obj) -> Obj:
        return {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": _meta(name),
            "spec": spec,
        }

    return [
        issuer(_SELF_SIGNED, {"selfSigned": {}}),
        certificate(
            _CA,
            {
                "isCA": True,
                "commonName": _CA,
                "secretName": _CA,
                "duration": "87600h",
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"kind": "Issuer", "name": _SELF_SIGNED},
            },
        ),
        issuer(_CA, {"ca": {"secretName": _CA}}),
        certificate(
            WEBHOOK_SECRET,
            {
                "secretName": WEBHOOK_SECRET,
                "dnsNames": dns,
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": {"kind": "Issuer", "name": _CA},
            },
        ),
    ]


def _cert_manager_overlay(objects: list[Obj]) -> list[Obj]:
    """The manager objects as the cert-manager overlay changes them."""
    inject = {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK_SECRET}"}
    out: list[Obj] = []
    for obj in objects:
        kind = obj["kind"]
        if kind == "Secret" and obj["metadata"]["name"] == WEBHOOK_SECRET:
            continue  # cert-manager owns it
        if kind == "ConfigMap" and obj["metadata"]["name"] == CONFIG_MAP:
            obj = _config_map(cert_management=False)
        elif kind.endswith("WebhookConfiguration"):
            obj = {**obj, "metadata": {**obj["metadata"], "annotations": dict(inject)}}
        elif kind == "Role" and obj["metadata"]["name"] == NAME:
            obj = {**obj, "rules": [r for r in obj["rules"] if r["resources"] != ["secrets"]]}
        elif kind == "ClusterRole":
            obj = {
                **obj,
                "rules": [
                    r for r in obj["rules"] if r["apiGroups"] != ["admissionregistration.k8s.io"]
                ],
            }
        elif kind == "Deployment":
            obj = _with_cert_volume(obj)
        out.append(obj)
    return out + _cert_manager_objects()


def _cert_volume_patch() -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME),
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "manager",
                            "volumeMounts": [
                                {"name": "cert", "mountPath": CERT_DIR, "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "cert", "secret": {"secretName": WEBHOOK_SECRET}}],
                }
            }
        },
    }


def _with_cert_volume(deployment: Obj) -> Obj:
    import copy

    out = copy.deepcopy(deployment)
    pod = out["spec"]["template"]["spec"]
    patch = _cert_volume_patch()["spec"]["template"]["spec"]
    # Strategic merge puts patched list items first; do the same so both renders are equal.
    mounts = pod["containers"][0]["volumeMounts"]
    pod["containers"][0]["volumeMounts"] = patch["containers"][0]["volumeMounts"] + mounts
    pod["volumes"] = patch["volumes"] + pod["volumes"]
    return out


OVERLAYS: dict[str, Callable[[], list[Obj]]] = {}


def _manager() -> list[Obj]:
    return [o for objs in _base_files().values() for o in objs]


OVERLAYS["manager"] = _manager
OVERLAYS["runtimes"] = _runtimes
OVERLAYS["cert-manager"] = lambda: _cert_manager_overlay(_manager())
OVERLAYS["default"] = lambda: _manager() + _runtimes()


def install_objects(overlay: str = "default") -> list[Obj]:
    """Every object of one overlay, in apply order (namespace and CRDs first)."""
    try:
        build = OVERLAYS[overlay]
    except KeyError:
        raise ValueError(f"unknown overlay {overlay!r} (known: {', '.join(OVERLAYS)})") from None
    return build()


def _kustomization(resources: list[str], **extra: Any) -> Obj:
    doc: Obj = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    doc.update(extra)
    return doc


_HEADER = "# Generated by `kubetrain install --write-manifests manifests`; do not edit.\n"


def manifest_files() -> dict[str, str]:
    """The whole ``manifests/`` tree: relative path → file text."""
    from kubetrain.api.dump import dump_yaml

    base = _base_files()
    docs: dict[str, list[Obj]] = dict(base)
    dirs: dict[str, list[str]] = {}
    for path in base:
        directory, _, name = path.rpartition("/")
        dirs.setdefault(directory, []).append(name)
    base_dirs = sorted(d for d in dirs if d != "base")
    docs["base/kustomization.yaml"] = [
        _kustomization(dirs["base"] + [d.removeprefix("base/") for d in base_dirs])
    ]
    for directory in base_dirs:
        docs[f"{directory}/kustomization.yaml"] = [_kustomization(sorted(dirs[directory]))]
    runtime_files = _runtime_files()
    docs.update(runtime_files)
    docs["overlays/runtimes/kustomization.yaml"] = [
        _kustomization(sorted(p.rpartition("/")[2] for p in runtime_files))
    ]
    docs["overlays/manager/kustomization.yaml"] = [_kustomization(["../../base"])]
    docs["overlays/cert-manager/certificate.yaml"] = _cert_manager_objects()
    docs["overlays/cert-manager/kustomization.yaml"] = [
        _kustomization(
            ["../../base", "certificate.yaml"],
            patches=[
                {"path": "config.yaml"},
                {"path": "deployment.yaml"},
                {"path": "webhooks.yaml"},
                {"path": "rbac.yaml"},
            ],
        )
    ]
    docs["overlays/cert-manager/config.yaml"] = [_config_map(cert_management=False)]
    docs["overlays/cert-manager/deployment.yaml"] = [_cert_volume_patch()]
    docs["overlays/cert-manager/webhooks.yaml"] = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": o["kind"],
            "metadata": o["metadata"],
        }
        for o in _webhook_configurations(
            {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{WEBHOOK_SECRET}"}
        )
    ] + [
        {
            "$patch": "delete",
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(WEBHOOK_SECRET),
        }
    ]
    cluster_role = _cluster_role()
    role = _namespaced_role()
    docs["overlays/cert-manager/rbac.yaml"] = [
        {
            **cluster_role,
            "rules": [
                r
                for r in cluster_role["rules"]
                if r["apiGroups"] != ["admissionregistration.k8s.io"]
            ],
        },
        {**role, "rules": [r for r in role["rules"] if r["resources"] != ["secrets"]]},
    ]
    docs["kustomization.yaml"] = [_kustomization(["overlays/manager", "overlays/runtimes"])]
    return {path: _HEADER + dump_yaml(objs) for path, objs in sorted(docs.items())}


def write_manifests(root: Path) -> list[Path]:
    """(Re)write ``manifests/`` under ``root``; files not generated here are removed."""
    files = manifest_files()
    written = []
    for existing in sorted(root.rglob("*.yaml")) if root.exists() else []:
        if str(existing.relative_to(root)) not in files:
            existing.unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
