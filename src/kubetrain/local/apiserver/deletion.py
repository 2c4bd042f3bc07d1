"""Deletion: finalizers, propagation policies, and the garbage and namespace controllers' work.

A mixin of ``Engine``: the same synchronous-then-commit discipline, in its own module. Everything
kube-controller-manager would do later (collect dependents, finish foreground deletions, empty
and remove a terminating namespace) happens here within the request, so that tests and the
controller see a settled state as soon as the DELETE is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from kubetrain.api import codec
from kubetrain.api.access import as_list, dicts, list_at, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.crds import (
    CLEANUP_FINALIZER,
    crd_name,
    held_for_cleanup,
    is_crd,
    served_resource,
)
from kubetrain.local.apiserver.ops import Op, Result
from kubetrain.local.apiserver.resources import Registry, ResourceDef
from kubetrain.local.apiserver.selectors import FieldSelector, LabelSelector
from kubetrain.local.apiserver.store import Change, Store

__all__ = ["PROTECTED_NAMESPACES", "RETURNS_DELETED_OBJECT", "Deletion"]

PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})

# Kinds whose immediate deletion answers with the deleted object (their registries set
# ReturnDeletedObject); every other kind answers with a Success Status naming what went.
# An object that stays (finalizers, graceful deletion) is always returned.
RETURNS_DELETED_OBJECT = frozenset(
    {("", "Pod"), ("", "Service"), ("", "ServiceAccount"), ("", "Node"), ("", "Namespace")}
)


class Deletion:
    """Delete, delete-collection and what follows a removal."""

    registry: Registry
    store: Store
    clock: Callable[[], str]
    # The namespace controller's pending passes (kept so they are not garbage-collected).
    _controller_tasks: set[asyncio.Task[None]]

    def get(self, res: ResourceDef, namespace: str | None, name: str) -> dict[str, Any]:
        raise NotImplementedError  # provided by Engine

    def _ensure_default_service_account(self, op: Op, namespace: str) -> None:
        raise NotImplementedError  # provided by Engine

    def list_objects(
        self,
        res: ResourceDef,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int = 0,
        continue_token: str = "",
    ) -> dict[str, Any]:
        raise NotImplementedError  # provided by Engine

    # ==== delete =========================================================================
    async def delete(
        self,
        res: ResourceDef,
        namespace: str | None,
        name: str,
        options: Mapping[str, Any],
        dry_run: bool = False,
    ) -> Result:
        op = Op()
        obj = self.get(res, namespace, name)
        pre = obj_at(options, "preconditions")
        meta = obj["metadata"]
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise E.conflict(
                res.group,
                res.plural,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get(
            "resourceVersion"
        ):
            raise E.conflict(
                res.group,
                res.plural,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        policy = policy or "Background"
        if policy not in ("Foreground", "Background", "Orphan"):
            raise E.invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                [
                    FieldError(
                        "propagationPolicy",
                        f'"{policy}": supported values: "Foreground", "Background", "Orphan"',
                        "NotSupported",
                    )
                ],
            )
        if dry_run:
            return Result(obj, 200)
        grace = options.get("gracePeriodSeconds")
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
            raise E.bad_request(f"gracePeriodSeconds: must be an integer, not {grace!r}")
        if res.kind == "Namespace" and not res.group:
            result = self._delete_namespace(op, res, obj)
        else:
            if is_crd(res.group, res.kind) and not meta.get("deletionTimestamp"):
                result = self._delete_crd(op, res, obj, policy, grace)
            else:
                result = self._delete(op, res, obj, policy, grace)
            removed = self.store.get(res.key, meta.get("namespace", ""), name) is None
            if removed and (res.group, res.kind) not in RETURNS_DELETED_OBJECT:
                details = {"name": name, "group": res.group, "kind": res.plural, "uid": meta["uid"]}
                result = Result(E.status_success({k: v for k, v in details.items() if v}), 200)
        await op.done()
        return result

    async def delete_collection(
        self,
        res: ResourceDef,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        options: Mapping[str, Any],
    ) -> Result:
        listed = self.list_objects(res, namespace, labels, fields)
        op = Op()
        deleted = []
        policy = options.get("propagationPolicy") or "Background"
        for obj in listed["items"]:
            current = self.store.get(
                res.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            )
            if current is not None:
                grace = options.get("gracePeriodSeconds")
                grace = grace if isinstance(grace, int) and not isinstance(grace, bool) else None
                deleted.append(self._delete(op, res, current, policy, grace).body)
        await op.done()
        listed["items"] = deleted
        return Result(listed, 200)

    def _delete(
        self,
        op: Op,
        res: ResourceDef,
        obj: dict[str, Any],
        policy: str,
        grace: int | None = None,
    ) -> Result:
        meta = obj["metadata"]
        uid = meta.get("uid", "")
        if policy == "Orphan":
            self._orphan(op, uid)
        period = _grace_period(res, obj, grace)
        if meta.get("deletionTimestamp"):
            if period == 0 and not meta.get("finalizers") and _is_pod(res):
                # The kubelet's final delete once the pod's processes have ended.
                return self._remove_now(op, res, obj)
            return Result(obj, 200)
        finalizers = list(as_list(meta.get("finalizers")))
        dependents = self.store.dependents(uid)
        if policy == "Foreground" and dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if not finalizers and not period:
            return self._remove_now(op, res, obj)
        marked = codec.clone(obj)
        marked["metadata"]["deletionTimestamp"] = _later(self.clock(), period)
        marked["metadata"]["deletionGracePeriodSeconds"] = period
        if finalizers:
            marked["metadata"]["finalizers"] = finalizers
        rv = self.store.next_rv()
        marked["metadata"]["resourceVersion"] = str(rv)
        op.futures.append(
            self.store.put(
                Change(
                    rv, "MODIFIED", res.key, meta.get("namespace", ""), meta["name"], marked, obj
                )
            )
        )
        if "foregroundDeletion" in finalizers:
            for dep in dependents:
                self._collect(op, dep, "Foreground")
            self._maybe_finish_foreground(op, uid)
        current = self.store.get(res.key, meta.get("namespace", ""), meta["name"])
        return Result(current or marked, 200)

    def _remove_now(self, op: Op, res: ResourceDef, obj: dict[str, Any]) -> Result:
        rv = self.store.next_rv()
        gone = codec.clone(obj)
        gone["metadata"]["resourceVersion"] = str(rv)
        self._remove(op, res, gone, rv)
        return Result(gone, 200)

    def _orphan(self, op: Op, uid: str) -> None:
        for resource, ns, name in self.store.dependents(uid):
            dep = self.store.get(resource, ns, name)
            if dep is None:
                continue
            new = codec.clone(dep)
            refs = [r for r in dicts(new["metadata"].get("ownerReferences")) if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            rv = self.store.next_rv()
            new["metadata"]["resourceVersion"] = str(rv)
            op.futures.append(self.store.put(Change(rv, "MODIFIED", resource, ns, name, new, dep)))

    def _remove(self, op: Op, res: ResourceDef, obj: dict[str, Any], rv: int) -> None:
        """Take ``obj`` out of the store, then do what the garbage and namespace controllers would."""
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        old = self.store.get(res.key, ns, meta["name"])
        op.futures.append(
            self.store.put(Change(rv, "DELETED", res.key, ns, meta["name"], obj, old))
        )
        uid = meta.get("uid", "")
        for dep in self.store.dependents(uid):
            dep_obj = self.store.get(*dep)
            if dep_obj is None:
                continue
            live_owner = any(
                self.store.locate_uid(r.get("uid", "")) is not None
                for r in dicts(dep_obj["metadata"].get("ownerReferences"))
                if r.get("uid") != uid
            )
            if not live_owner:
                self._collect(op, dep, "Background")
        for ref in dicts(meta.get("ownerReferences")):
            self._maybe_finish_foreground(op, ref.get("uid", ""))
        if res.group:
            self._maybe_finish_crd(op, res)
        if ns:
            if (res.group, res.kind, meta["name"]) == ("", "ServiceAccount", "default"):
                # The ServiceAccount controller puts back a deleted `default` account.
                self._ensure_default_service_account(op, ns)
            self._maybe_finish_namespace(op, ns)

    def _collect(self, op: Op, ident: tuple[str, str, str], policy: str) -> None:
        resource, ns, name = ident
        obj = self.store.get(resource, ns, name)
        res = self._resource_of(resource)
        if obj is None or res is None:
            return
        self._delete(op, res, obj, policy)

    def _resource_of(self, key: str) -> ResourceDef | None:
        return self.registry.by_key(key)

    def _maybe_finish_foreground(self, op: Op, owner_uid: str) -> None:
        where = self.store.locate_uid(owner_uid)
        if where is None:
            return
        owner = self.store.get(*where)
        if owner is None:
            return
        meta = owner["metadata"]
        finalizers = as_list(meta.get("finalizers"))
        if not meta.get("deletionTimestamp") or "foregroundDeletion" not in finalizers:
            return
        if self.store.dependents(owner_uid):
            return
        res = self._resource_of(where[0])
        if res is None:
            return
        self._drop_finalizer(op, res, owner, "foregroundDeletion")

    def _delete_crd(
        self, op: Op, res: ResourceDef, crd: dict[str, Any], policy: str, grace: int | None
    ) -> Result:
        """The apiextensions server's deletion of a CRD: its instances first (the cleanup
        finalizer's pass, their dependents collected), then the CRD itself, at once when no
        instance is held by a finalizer, else when the last one goes (``_maybe_finish_crd``)."""
        served = served_resource(crd, self.registry)
        if served is not None:
            for obj in self.store.items(served.key):
                self._delete(op, served, obj, "Background")
            if any(True for _ in self.store.keys(served.key)):
                crd = held_for_cleanup(crd, self.clock())
        return self._delete(op, res, crd, policy, grace)

    def _terminating_crd(self, res: ResourceDef) -> tuple[ResourceDef, dict[str, Any]] | None:
        """The CRD defining ``res`` when it is being deleted (held by the cleanup finalizer)."""
        crd_res = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        crd = self.store.get(crd_res.key, "", crd_name(res)) if crd_res is not None else None
        if crd_res is None or crd is None:
            return None
        if CLEANUP_FINALIZER not in list_at(crd, "metadata", "finalizers"):
            return None
        return crd_res, crd

    def refuse_while_crd_terminating(self, res: ResourceDef) -> None:
        """What the apiextensions server answers a create of a kind whose CRD is going."""
        if res.group and self._terminating_crd(res) is not None:
            raise E.method_not_allowed(
                "create not allowed while custom resource definition is terminating"
            )

    def _maybe_finish_crd(self, op: Op, res: ResourceDef) -> None:
        """After an instance went: a terminating CRD with none left drops its finalizer."""
        held = self._terminating_crd(res)
        if held is None:
            return
        crd_res, crd = held
        if not any(True for _ in self.store.keys(res.key)):
            self._drop_finalizer(op, crd_res, crd, CLEANUP_FINALIZER)

    def _drop_finalizer(
        self, op: Op, res: ResourceDef, obj: dict[str, Any], finalizer: str
    ) -> None:
        """A deleted object's ``finalizer`` done with: it is written back without it, or
        removed once no finalizer is left."""
        new = codec.clone(obj)
        meta = new["metadata"]
        meta["finalizers"] = [f for f in as_list(meta.get("finalizers")) if f != finalizer]
        rv = self.store.next_rv()
        meta["resourceVersion"] = str(rv)
        if meta["finalizers"]:
            where = (res.key, meta.get("namespace", ""), meta["name"])
            op.futures.append(self.store.put(Change(rv, "MODIFIED", *where, new, obj)))
        else:
            self._remove(op, res, new, rv)

    def _delete_namespace(self, op: Op, res: ResourceDef, ns_obj: dict[str, Any]) -> Result:
        name = ns_obj["metadata"]["name"]
        if name in PROTECTED_NAMESPACES:
            raise E.forbidden(
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                {"name": name, "kind": "namespaces"},
            )
        if not ns_obj["metadata"].get("deletionTimestamp"):
            marked = codec.clone(ns_obj)
            marked["metadata"]["deletionTimestamp"] = self.clock()
            marked.setdefault("status", {})["phase"] = "Terminating"
            rv = self.store.next_rv()
            marked["metadata"]["resourceVersion"] = str(rv)
            op.futures.append(
                self.store.put(Change(rv, "MODIFIED", res.key, "", name, marked, ns_obj))
            )
            # The namespace controller's first pass: delete everything in the namespace.
            for other in self.registry.stored():
                if not other.namespaced:
                    continue
                for obj in list(self.store.items(other.key, name)):
                    self._delete(op, other, obj, "Background")
            self._maybe_finish_namespace(op, name)
        current = self.store.get(res.key, "", name)
        return Result(current or ns_obj, 200)

    def _maybe_finish_namespace(self, op: Op, namespace: str) -> None:
        """Once a terminating namespace is empty, let the namespace controller finish it.

        That happens after the current request, as kube-controller-manager's pass would: the
        DELETE answers with the ``Terminating`` namespace and watchers see it terminate.
        """
        ns_obj = self.store.get("/namespaces", "", namespace)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): finish within this request
            self._finish_namespace(op, namespace)
            return
        task = loop.create_task(self._namespace_controller(namespace))
        self._controller_tasks.add(task)
        task.add_done_callback(self._controller_tasks.discard)

    async def _namespace_controller(self, namespace: str) -> None:
        await asyncio.sleep(0)  # after the request that emptied the namespace has answered
        op = Op()
        self._finish_namespace(op, namespace)
        await op.done()

    def _finish_namespace(self, op: Op, namespace: str) -> None:
        """Finalize an empty terminating namespace: drop ``kubernetes`` from its
        ``spec.finalizers`` (what ``/finalize`` does), then remove it if nothing else holds it."""
        ns_obj = self.store.get("/namespaces", "", namespace)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        for other in self.registry.stored():
            if other.namespaced and self.store.count(other.key, namespace):
                return
        res = self._resource_of("/namespaces")
        if res is None:
            return
        spec_finalizers = list_at(ns_obj, "spec", "finalizers")
        if "kubernetes" in spec_finalizers:
            finalized = codec.clone(ns_obj)
            finalized["spec"]["finalizers"] = [f for f in spec_finalizers if f != "kubernetes"]
            rv = self.store.next_rv()
            finalized["metadata"]["resourceVersion"] = str(rv)
            op.futures.append(
                self.store.put(Change(rv, "MODIFIED", res.key, "", namespace, finalized, ns_obj))
            )
            ns_obj = finalized
        if ns_obj["metadata"].get("finalizers") or obj_at(ns_obj, "spec").get("finalizers"):
            return
        rv = self.store.next_rv()
        gone = codec.clone(ns_obj)
        gone["metadata"]["resourceVersion"] = str(rv)
        op.futures.append(
            self.store.put(Change(rv, "DELETED", res.key, "", namespace, gone, ns_obj))
        )


def _is_pod(res: ResourceDef) -> bool:
    return res.kind == "Pod" and not res.group


def _grace_period(res: ResourceDef, obj: dict[str, Any], grace: int | None) -> int:
    """Seconds a deleted object stays, terminating, before it is removed: Kubernetes' graceful
    deletion of pods. A pod on a node stays until its kubelet has stopped every process and
    deletes it with grace 0; a pod no node runs, or one that has ended, goes at once."""
    if not _is_pod(res):
        return 0
    spec = obj_at(obj, "spec")
    phase = obj_at(obj, "status").get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    if grace is None:
        grace = spec.get("terminationGracePeriodSeconds")
    if grace is None:
        grace = 30
    return max(0, int(grace))


def _later(stamp: str, seconds: int) -> str:
    """``stamp`` (Kubernetes' timestamp form) plus ``seconds``."""
    if not seconds:
        return stamp
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return (when + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
