"""The LeaderWorkerSet CustomResourceDefinition the local engine serves.

Written here rather than copied: LWS's own CRD spells out two full PodTemplateSpecs (about
18,000 lines). This one has LWS's names, printer columns, status and scale subresources, and
its defaults and enums (what its kubebuilder markers say); the pod templates are kept as given
(``x-kubernetes-preserve-unknown-fields``), and the pods made from them are checked by the API
server as any pod is. What LWS's defaulting webhook adds beyond its CRD (a ``rolloutStrategy``
and a ``networkConfig`` where none is given, the deprecated ``Default`` restart policy rewritten
to ``None``) is not a schema default: `LwsDefaulter` (``admission``) applies it.

The embedded API server applies this schema's defaults as it applies any CRD's, on every write
and to what it loads from storage, so `logic` finds them in the stored object and repeats none.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["lws_crd"]

_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_INT_OR_STRING = {"x-kubernetes-int-or-string": True}

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["leaderWorkerTemplate"],
            "properties": {
                "replicas": {
                    "type": "integer", "format": "int32", "default": 1,
                    "minimum": 0, "maximum": 1000000,
                },
                "startupPolicy": {
                    "type": "string", "default": "LeaderCreated",
                    "enum": ["LeaderCreated", "LeaderReady"],
                },
                "rolloutStrategy": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {
                        "type": {"type": "string", "default": "RollingUpdate", "enum": ["RollingUpdate"]},
                        "rollingUpdateConfiguration": {
                            "type": "object",
                            "properties": {
                                "partition": {"type": "integer", "format": "int32", "default": 0},
                                "maxUnavailable": {**_INT_OR_STRING, "default": 1},
                                "maxSurge": {**_INT_OR_STRING, "default": 0},
                            },
                        },
                    },
                },
                "networkConfig": {
                    "type": "object",
                    "required": ["subdomainPolicy"],
                    "properties": {
                        "subdomainPolicy": {"type": "string", "enum": ["Shared", "UniquePerReplica"]},
                    },
                },
                "leaderWorkerTemplate": {
                    "type": "object",
                    "required": ["workerTemplate"],
                    "properties": {
                        "size": {"type": "integer", "format": "int32", "default": 1, "minimum": 1},
                        "restartPolicy": {
                            "type": "string", "default": "RecreateGroupOnPodRestart",
                            "enum": ["Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"],
                        },
                        "leaderTemplate": _OPEN,
                        "workerTemplate": _OPEN,
                        "subGroupPolicy": {
                            "type": "object",
                            "properties": {
                                "subGroupPolicyType": {
                                    "type": "string", "default": "LeaderWorker",
                                    "enum": ["LeaderWorker", "LeaderExcluded"],
                                },
                                "subGroupSize": {"type": "integer", "format": "int32"},
                            },
                        },
                        "volumeClaimTemplates": {"type": "array", "items": _OPEN},
                        "persistentVolumeClaimRetentionPolicy": _OPEN,
                    },
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "conditions": {"type": "array", "items": _OPEN},
                "readyReplicas": {"type": "integer", "format": "int32"},
                "updatedReplicas": {"type": "integer", "format": "int32"},
                "replicas": {"type": "integer", "format": "int32"},
                "hpaPodSelector": {"type": "string"},
                "observedGeneration": {"type": "integer", "format": "int64"},
            },
        },
    },
}  # fmt: skip

_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {
        "group": "leaderworkerset.x-k8s.io",
        "names": {
            "kind": "LeaderWorkerSet",
            "listKind": "LeaderWorkerSetList",
            "plural": "leaderworkersets",
            "singular": "leaderworkerset",
            "shortNames": ["lws"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": _SCHEMA},
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.hpaPodSelector",
                    },
                },
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
                    {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
                    {
                        "name": "Up-to-date",
                        "type": "integer",
                        "jsonPath": ".status.updatedReplicas",
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}


def lws_crd() -> dict[str, Any]:
    """A fresh copy the caller may change."""
    return copy.deepcopy(_CRD)
