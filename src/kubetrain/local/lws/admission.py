"""LeaderWorkerSet's mutating webhook on the local engine: the defaults LWS sets beyond its CRD.

On a cluster LWS's controller manager serves a defaulting webhook for every create and update
of a LeaderWorkerSet (``pkg/webhooks/leaderworkerset_webhook.go``, ``Default``, at
kubernetes-sigs/lws v0.10.0). The local engine serves LWS's CRD itself (`lws_crd`) and runs
its controller in-process, so its API server applies the same rules through `LwsDefaulter`,
after the CRD's own defaults, as kube-apiserver calls a webhook after schema defaulting:

- ``leaderWorkerTemplate.restartPolicy``: ``RecreateGroupOnPodRestart`` when unset (the CRD
  default already says so), and the deprecated ``Default`` rewritten to ``None``;
- ``rolloutStrategy``: ``type: RollingUpdate`` when unset, and for a rolling update without a
  ``rollingUpdateConfiguration``, ``partition: 0, maxUnavailable: 1, maxSurge: 0``;
- ``networkConfig``: ``subdomainPolicy: Shared`` when the config or the policy is unset.

``startupPolicy`` (``LeaderCreated``), ``replicas`` and ``size`` (1) are CRD defaults, applied
by the API server before this runs. Not repeated: what LWS's Go types add on their JSON round
trip (``creationTimestamp: null`` in the pod templates and the like), and LWS's validating
webhook (the CRD's schema checks what it can).
"""

from __future__ import annotations

from typing import Any

from kubetrain.api import codec
from kubetrain.local.apiserver.admission import ObjectReader, Operation, PermissiveAdmission

from .logic import API_VERSION, KIND

__all__ = ["LwsDefaulter", "default_lws"]

Obj = dict[str, Any]

_ROLLING_UPDATE = "RollingUpdate"


def default_lws(lws: Obj) -> Obj:
    """``lws`` with LWS's webhook defaults set (a copy; the argument is left as it is).

    A field of the wrong type is left for the schema's validation to name.
    """
    out: Obj = codec.clone(lws)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    template = spec.get("leaderWorkerTemplate")
    if isinstance(template, dict):
        policy = template.get("restartPolicy") or "RecreateGroupOnPodRestart"
        template["restartPolicy"] = "None" if policy == "Default" else policy
    rollout = spec.get("rolloutStrategy")
    if rollout is None:
        rollout = spec["rolloutStrategy"] = {}
    if isinstance(rollout, dict):
        rollout["type"] = rollout.get("type") or _ROLLING_UPDATE
        if rollout["type"] == _ROLLING_UPDATE and rollout.get("rollingUpdateConfiguration") is None:
            rollout["rollingUpdateConfiguration"] = {
                "partition": 0,
                "maxUnavailable": 1,
                "maxSurge": 0,
            }
    network = spec.get("networkConfig")
    if network is None:
        network = spec["networkConfig"] = {}
    if isinstance(network, dict) and network.get("subdomainPolicy") is None:
        network["subdomainPolicy"] = "Shared"
    return out


class LwsDefaulter(PermissiveAdmission):
    """`default_lws` on every create and update of a LeaderWorkerSet (LWS's webhook's verbs)."""

    def mutate(
        self,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        reader: ObjectReader,
    ) -> dict[str, Any]:
        if operation == "DELETE" or obj.get("kind") != KIND or obj.get("apiVersion") != API_VERSION:
            return obj
        return default_lws(obj)
