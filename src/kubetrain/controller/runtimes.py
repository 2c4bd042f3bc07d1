"""TrainingRuntime / ClusterTrainingRuntime reconcilers: strip the legacy finalizer.

Since v2.3 runtimes may be deleted freely (running jobs keep their snapshot), so the
``trainer.kubeflow.org/resource-in-use`` finalizer that v2.2 controllers added is only removed,
never added. Without this, a runtime created under v2.2 could never be deleted after an upgrade.
"""

from __future__ import annotations

from kubetrain.api.access import list_at, obj_at
from kubetrain.api.labels import RESOURCE_IN_USE_FINALIZER
from kubetrain.controller.trainjob import ReconcileError
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.informer import Informer

__all__ = ["RuntimeFinalizerReconciler"]


class RuntimeFinalizerReconciler:
    def __init__(self, client: KubeClient, cache: Informer) -> None:
        self._client = client
        self._cache = cache

    async def reconcile(self, namespace: str, name: str) -> float | None:
        runtime = self._cache.get(name, namespace)
        if runtime is None:
            return None
        meta = obj_at(runtime, "metadata")
        finalizers = list(list_at(meta, "finalizers"))
        if RESOURCE_IN_USE_FINALIZER not in finalizers:
            return None
        kept = [f for f in finalizers if f != RESOURCE_IN_USE_FINALIZER]
        kind = self._cache.kind
        # resourceVersion in the patch makes it conditional: a finalizer someone else added in
        # the meantime is not dropped (409, then retried from the fresh cache).
        body = {"metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}}
        try:
            written = await self._client.patch(
                kind.api_version,
                kind.plural,
                name,
                body,
                namespace=namespace if kind.namespaced else None,
            )
        except ApiError as err:
            if err.not_found:
                return None
            raise ReconcileError(f"removing finalizer from {kind.kind} {name}: {err}") from err
        except TRANSPORT_ERRORS as err:
            raise ReconcileError(f"removing finalizer from {kind.kind} {name}: {err}") from err
        self._cache.observe(written)
        return None
