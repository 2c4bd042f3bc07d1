"""The Kubernetes core/v1, batch/v1 and meta/v1 pieces that the Trainer and JobSet kinds embed.

Only the fields kubetrain reads or writes by name are spelled out (all optional, ``total=False``);
the objects themselves stay plain dicts, so every other field passes through untouched. The full
schemas of these types come from the Kubernetes OpenAPI definitions named in
``OPENAPI_DEFINITIONS``: ``tools/gen_crds.py`` embeds those into our CRDs.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "OPENAPI_DEFINITIONS",
    "Affinity",
    "Condition",
    "ConfigMapKeySelector",
    "Container",
    "ContainerPort",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "JobSpec",
    "JobTemplateSpec",
    "LocalObjectReference",
    "ObjectFieldSelector",
    "ObjectMeta",
    "OwnerReference",
    "PersistentVolumeClaim",
    "PodSecurityContext",
    "PodSpec",
    "PodTemplateSpec",
    "Quantity",
    "ResourceRequirements",
    "SecretKeySelector",
    "SecurityContext",
    "Toleration",
    "Volume",
    "VolumeMount",
]

# A Kubernetes quantity as it appears on the wire: "500m", "2Gi", 2, or 2.0 from the official SDK.
Quantity = str | int | float


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]
    managedFields: list[dict[str, Any]]


class LocalObjectReference(TypedDict, total=False):
    name: str


class ObjectFieldSelector(TypedDict, total=False):
    apiVersion: str
    fieldPath: str


class ConfigMapKeySelector(TypedDict, total=False):
    name: str
    key: str
    optional: bool


class SecretKeySelector(TypedDict, total=False):
    name: str
    key: str
    optional: bool


class EnvVarSource(TypedDict, total=False):
    fieldRef: ObjectFieldSelector
    resourceFieldRef: dict[str, Any]
    configMapKeyRef: ConfigMapKeySelector
    secretKeyRef: SecretKeySelector
    fileKeyRef: dict[str, Any]


class EnvVar(TypedDict, total=False):
    name: str
    value: str
    valueFrom: EnvVarSource


class EnvFromSource(TypedDict, total=False):
    prefix: str
    configMapRef: LocalObjectReference
    secretRef: LocalObjectReference


class ResourceRequirements(TypedDict, total=False):
    limits: dict[str, Quantity]
    requests: dict[str, Quantity]
    claims: list[dict[str, Any]]


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    protocol: str
    hostPort: int
    hostIP: str


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool
    subPath: str
    subPathExpr: str
    mountPropagation: str
    recursiveReadOnly: str


# Open-ended core objects kubetrain copies but never looks inside.
SecurityContext = dict[str, Any]
PodSecurityContext = dict[str, Any]
Affinity = dict[str, Any]
Toleration = dict[str, Any]
PersistentVolumeClaim = dict[str, Any]


class Container(TypedDict, total=False):
    name: str
    image: str
    imagePullPolicy: str
    command: list[str]
    args: list[str]
    workingDir: str
    env: list[EnvVar]
    envFrom: list[EnvFromSource]
    ports: list[ContainerPort]
    resources: ResourceRequirements
    volumeMounts: list[VolumeMount]
    securityContext: SecurityContext
    restartPolicy: str


class Volume(TypedDict, total=False):
    name: str
    emptyDir: dict[str, Any]
    configMap: dict[str, Any]
    secret: dict[str, Any]
    persistentVolumeClaim: dict[str, Any]
    hostPath: dict[str, Any]
    projected: dict[str, Any]


class PodSpec(TypedDict, total=False):
    containers: list[Container]
    initContainers: list[Container]
    volumes: list[Volume]
    restartPolicy: str
    serviceAccountName: str
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: list[Toleration]
    schedulerName: str
    priorityClassName: str
    securityContext: PodSecurityContext
    imagePullSecrets: list[LocalObjectReference]
    schedulingGates: list[dict[str, Any]]
    terminationGracePeriodSeconds: int
    hostname: str
    subdomain: str


class PodTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class JobSpec(TypedDict, total=False):
    parallelism: int
    completions: int
    completionMode: str
    backoffLimit: int
    backoffLimitPerIndex: int
    activeDeadlineSeconds: int
    ttlSecondsAfterFinished: int
    suspend: bool
    template: PodTemplateSpec


class JobTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSpec


class Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


# Kubernetes OpenAPI definition for each class above, used by tools/gen_crds.py.
OPENAPI_DEFINITIONS: dict[str, str] = {
    "ObjectMeta": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    "OwnerReference": "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    "LocalObjectReference": "io.k8s.api.core.v1.LocalObjectReference",
    "ObjectFieldSelector": "io.k8s.api.core.v1.ObjectFieldSelector",
    "ConfigMapKeySelector": "io.k8s.api.core.v1.ConfigMapKeySelector",
    "SecretKeySelector": "io.k8s.api.core.v1.SecretKeySelector",
    "EnvVarSource": "io.k8s.api.core.v1.EnvVarSource",
    "EnvVar": "io.k8s.api.core.v1.EnvVar",
    "EnvFromSource": "io.k8s.api.core.v1.EnvFromSource",
    "ResourceRequirements": "io.k8s.api.core.v1.ResourceRequirements",
    "ContainerPort": "io.k8s.api.core.v1.ContainerPort",
    "VolumeMount": "io.k8s.api.core.v1.VolumeMount",
    "Container": "io.k8s.api.core.v1.Container",
    "Volume": "io.k8s.api.core.v1.Volume",
    "PodSpec": "io.k8s.api.core.v1.PodSpec",
    "PodTemplateSpec": "io.k8s.api.core.v1.PodTemplateSpec",
    "JobSpec": "io.k8s.api.batch.v1.JobSpec",
    "JobTemplateSpec": "io.k8s.api.batch.v1.JobTemplateSpec",
    "Condition": "io.k8s.apimachinery.pkg.apis.meta.v1.Condition",
    "SecurityContext": "io.k8s.api.core.v1.SecurityContext",
    "PodSecurityContext": "io.k8s.api.core.v1.PodSecurityContext",
    "Affinity": "io.k8s.api.core.v1.Affinity",
    "Toleration": "io.k8s.api.core.v1.Toleration",
    "PersistentVolumeClaim": "io.k8s.api.core.v1.PersistentVolumeClaim",
}
