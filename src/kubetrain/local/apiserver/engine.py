"""The object semantics of the API server, independent of HTTP.

Each public method is one API request. Its whole effect is computed synchronously on the event
loop (so no other request interleaves with it), applied to the in-memory store, and only then
awaited until SQLite has committed it. Admission runs synchronously inside that step too.

Order of a write, as in kube-apiserver: decode → prune and default (custom kinds) → mutating
admission → schema and metadata validation (422) → validating admission (403) → store.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubetrain.api import codec
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver import ssa
from kubetrain.local.apiserver.admission import (
    Admission,
    Operation,
    PermissiveAdmission,
    webhook_name,
)
from kubetrain.local.apiserver.crds import crd_errors, crd_status, is_crd
from kubetrain.local.apiserver.defaults import apply_core_defaults, generate_job_selector
from kubetrain.local.apiserver.deletion import Deletion
from kubetrain.local.apiserver.meta import (
    SERVER_FIELDS,
    changed_paths,
    generate_name,
    manager_paths,
    new_uid,
    now_iso,
    owned_fields,
    record_manager,
    spec_part,
    validate_metadata,
)
from kubetrain.local.apiserver.ops import Op, Result, WriteOptions, ns_key
from kubetrain.local.apiserver.patching import (
    apply_json_patch,
    merge_patch,
    strategic_merge_patch,
)
from kubetrain.local.apiserver.resources import Registry, ResourceDef
from kubetrain.local.apiserver.scale import replicas_of, scale_of
from kubetrain.local.apiserver.schema import CrdSchemas, SchemaRules
from kubetrain.local.apiserver.selectors import FieldSelector, LabelSelector
from kubetrain.local.apiserver.store import Change, Store
from kubetrain.local.apiserver.webhooks import AdmissionAttributes, WebhookDispatcher

# The largest object stored (kube-apiserver: 1 MiB of ConfigMap or Secret data; etcd's
# request limit is about that).
MAX_OBJECT_BYTES = 1024 * 1024

__all__ = ["Engine", "Result", "WriteOptions"]

_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_JSON = "application/apply-patch+json"


class _Reader:
    """The ObjectReader admission gets: read-only lookups by apiVersion/kind."""

    def __init__(self, registry: Registry, store: Store) -> None:
        self._registry = registry
        self._store = store

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        res = self._registry.by_kind(api_version, kind)
        if res is None:
            return None
        obj = self._store.get(res.key, (namespace or "") if res.namespaced else "", name)
        return codec.clone(obj) if obj is not None else None

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        res = self._registry.by_kind(api_version, kind)
        if res is None:
            return []
        items: list[dict[str, Any]] = codec.clone(
            self._store.items(res.key, namespace if res.namespaced else None)
        )
        return items


class Engine(Deletion):
    """Create, read, update, patch, apply and delete with Kubernetes semantics."""

    def __init__(
        self,
        registry: Registry,
        store: Store,
        *,
        admission: Admission | None = None,
        schema_rules: SchemaRules | None = None,
        clock: Callable[[], str] = now_iso,
        webhooks: WebhookDispatcher | None = None,
        escalation: Callable[[dict[str, Any], Any], str | None] | None = None,
    ) -> None:
        self.registry = registry
        self.store = store
        self.admission: Admission = admission or PermissiveAdmission()
        self.schema: SchemaRules = schema_rules or CrdSchemas(registry, store)
        self.clock = clock
        self.reader = _Reader(registry, store)
        self._controller_tasks = set()
        self.webhooks = webhooks
        # Why a user may not write an RBAC object (it grants more than they hold), or None.
        self.escalation = escalation

    # ==== reads ==========================================================================
    def get(self, res: ResourceDef, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.store.get(res.key, ns_key(res, namespace), name)
        if obj is None:
            raise E.not_found(res.group, res.plural, name)
        return obj

    def list_objects(
        self,
        res: ResourceDef,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int = 0,
        continue_token: str = "",
    ) -> dict[str, Any]:
        """A ``<Kind>List`` at the current resourceVersion; ``limit``/``continue`` page by (namespace, name)."""
        ns = namespace if res.namespaced else None
        name = fields.name()
        if name is not None and ns is not None:
            one = self.store.get(res.key, ns, name)
            candidates = [one] if one is not None else []
        else:
            candidates = self.store.items(res.key, ns)
        after: tuple[str, str] | None = None
        if continue_token:
            after = _decode_continue(continue_token)
        items: list[dict[str, Any]] = []
        more = False
        remaining = 0
        for obj in candidates:
            meta = obj["metadata"]
            if after is not None and (meta.get("namespace", ""), meta["name"]) <= after:
                continue
            if not labels.matches(obj) or not fields.matches(obj):
                continue
            if limit and len(items) >= limit:
                more = True
                remaining += 1
                continue
            items.append(obj)
        list_meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if more:
            last = items[-1]["metadata"]
            list_meta["continue"] = _encode_continue(
                self.store.rv, last.get("namespace", ""), last["name"]
            )
            list_meta["remainingItemCount"] = remaining
        return {
            "kind": res.list_kind,
            "apiVersion": res.api_version,
            "metadata": list_meta,
            "items": items,
        }

    # ==== create =========================================================================
    async def create(
        self,
        res: ResourceDef,
        namespace: str | None,
        body: Any,
        opts: WriteOptions,
        *,
        operation: str = "Update",
    ) -> Result:
        op = Op()
        result = await self._create(op, res, namespace, body, opts, operation)
        await op.done()
        return result

    async def _create(
        self,
        op: Op,
        res: ResourceDef,
        namespace: str | None,
        body: Any,
        opts: WriteOptions,
        operation: str,
    ) -> Result:
        obj = self._check_body(res, body)
        meta = obj["metadata"]
        ns = self._check_namespace(res, namespace, meta)
        self.refuse_while_crd_terminating(res)
        if not meta.get("name"):
            if meta.get("generateName"):
                for _ in range(8):
                    meta["name"] = generate_name(str(meta["generateName"]))
                    if self.store.get(res.key, ns, meta["name"]) is None:
                        break
            else:
                raise E.invalid(
                    res.group,
                    res.kind,
                    "",
                    [FieldError("metadata.name", "name or generateName is required", "Required")],
                )
        name = meta["name"]
        if not isinstance(name, str):
            raise E.bad_request("metadata.name must be a string")
        if self.store.get(res.key, ns, name) is not None:
            raise E.already_exists(res.group, res.plural, name)
        for key in SERVER_FIELDS:
            meta.pop(key, None)
        if res.has_status or res.initial_status is not None:
            obj.pop("status", None)
        if res.initial_status is not None:
            obj["status"] = codec.clone(dict(res.initial_status))
        _set_defaults(obj, res.create_defaults or {})
        if res.kind == "Namespace" and res.group == "":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        # An applier owns what it applied, not what defaulting and admission added.
        applied_fields = (
            ssa.owned_fields_v1(obj, self.schema.schema_of(res.api_version, res.kind))
            if operation == "Apply"
            else None
        )
        obj, warnings = await self._admit(res, "CREATE", obj, None, opts, subresource=None)
        if is_crd(res.group, res.kind):
            obj["status"] = crd_status(obj, self.registry, self.clock())
        if self.store.get(res.key, ns, name) is not None:
            raise E.already_exists(res.group, res.plural, name)  # created while webhooks ran
        return self._store_created(
            op, res, ns, name, obj, warnings, opts, operation, applied_fields
        )

    def _store_created(
        self,
        op: Op,
        res: ResourceDef,
        ns: str,
        name: str,
        obj: dict[str, Any],
        warnings: list[str],
        opts: WriteOptions,
        operation: str,
        applied_fields: dict[str, Any] | None,
    ) -> Result:
        """The server's part of a create once the object is admitted: identity, managed
        fields, the write, and what controllers do at once (a namespace's ServiceAccount)."""
        meta = obj["metadata"]
        now = self.clock()
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now
        if (res.api_version, res.kind) == ("batch/v1", "Job"):
            generate_job_selector(obj)
        if res.has_generation:
            meta["generation"] = 1
        meta["managedFields"] = [
            {
                "manager": opts.field_manager or "unknown",
                "operation": operation,
                "apiVersion": res.api_version,
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": applied_fields if applied_fields is not None else owned_fields(obj),
            }
        ]
        if opts.dry_run:
            meta["resourceVersion"] = str(self.store.rv)
            return Result(obj, 201, warnings)
        rv = self.store.next_rv()
        meta["resourceVersion"] = str(rv)
        op.futures.append(self.store.put(Change(rv, "ADDED", res.key, ns, name, obj, None)))
        if res.kind == "Namespace" and not res.group:
            self._ensure_default_service_account(op, name)
        refs = [
            r for r in meta.get("ownerReferences") or () if isinstance(r, dict) and r.get("uid")
        ]
        if refs and all(self.store.locate_uid(r["uid"]) is None for r in refs):
            # The garbage collector removes an object whose owners are all gone (e.g. a child
            # created just after its owner was deleted); here that happens at once.
            self._collect(op, (res.key, ns, name), "Background")
        return Result(obj, 201, warnings)

    def _check_body(self, res: ResourceDef, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise E.bad_request("the request body must be a JSON object")
        api_version = body.get("apiVersion") or res.api_version
        kind = body.get("kind") or res.kind
        if api_version != res.api_version or kind != res.kind:
            raise E.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({res.api_version})"
                if api_version != res.api_version
                else f"the kind in the data ({kind}) does not match the expected kind ({res.kind})"
            )
        body["apiVersion"], body["kind"] = api_version, kind
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise E.bad_request("metadata must be an object")
        return body

    def _check_namespace(
        self, res: ResourceDef, namespace: str | None, meta: dict[str, Any]
    ) -> str:
        if not res.namespaced:
            meta.pop("namespace", None)
            return ""
        ns = namespace or meta.get("namespace") or ""
        if meta.get("namespace") and meta["namespace"] != ns:
            raise E.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = ns
        ns_obj = self.store.get("/namespaces", "", ns)
        if ns_obj is None:
            raise E.not_found("", "namespaces", ns)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise E.forbidden(
                f'{res.plural} "{meta.get("name") or meta.get("generateName", "")}" is forbidden: unable to create new content '
                f"in namespace {ns} because it is being terminated",
                {
                    "name": meta.get("name", ""),
                    "kind": res.plural,
                    **({"group": res.group} if res.group else {}),
                },
            )
        return ns

    async def _admit(
        self,
        res: ResourceDef,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        opts: WriteOptions,
        subresource: str | None,
    ) -> tuple[dict[str, Any], list[str]]:
        warnings: list[str] = []
        name = obj["metadata"].get("name", "")
        schematic = self.schema.knows(res.api_version, res.kind)
        if schematic:
            # What an update leaves as this server stored it was pruned and defaulted then.
            settled = self._settled(obj, old)
            pruned = self.schema.prune(obj, settled)
            if pruned and opts.field_validation == "Strict":
                raise E.bad_request(
                    "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in pruned)
                )
            if pruned and opts.field_validation != "Ignore":
                warnings += [f'unknown field "{p}"' for p in pruned]
            self.schema.default(obj, settled)
        elif not res.custom:
            apply_core_defaults(res.api_version, res.kind, obj)
        if subresource is None:
            obj = self.admission.mutate(operation, obj, old, reader=self.reader)
        hooks = self._webhook_attributes(res, operation, obj, old, opts, subresource)
        if hooks is not None:
            # Only when a configuration matches does this await (and other requests interleave).
            mutated, more = await self.webhooks.mutate(hooks) if self.webhooks else (None, [])
            warnings += more
            if mutated is not None and mutated != obj:
                obj = mutated
                if schematic:
                    settled = self._settled(obj, old)
                    self.schema.prune(obj, settled)
                    self.schema.default(obj, settled)
        path_segment = res.group == _RBAC_GROUP  # RBAC names only need to fit in a URL path
        errors = validate_metadata(
            obj["metadata"],
            dns_label=res.kind == "Namespace" and not res.group,
            check_name=operation == "CREATE" and not path_segment,
        )
        if operation == "CREATE" and path_segment:
            errors += _path_segment_errors(str(name))
        size = len(codec.dumps(obj))
        if size > MAX_OBJECT_BYTES:
            # What a ConfigMap or Secret may hold on a cluster, and about what etcd stores.
            errors.append(
                FieldError("", f"Too long: must have at most {MAX_OBJECT_BYTES} bytes", "TooLong")
            )
        elif schematic:
            errors += self.schema.validate(obj, self._settled(obj, old))
        elif subresource is None and is_crd(res.group, res.kind):
            errors += crd_errors(obj)
        if errors:
            raise E.invalid(res.group, res.kind, name, errors)
        if path_segment and self.escalation is not None and opts.user is not None:
            why = self.escalation(obj, opts.user)
            if why:
                raise E.forbidden(
                    f'{res.qualified} "{name}" is forbidden: {why}',
                    {"name": name, "group": res.group, "kind": res.plural},
                )
        if subresource is None:
            denied, more = self.admission.validate(operation, obj, old, reader=self.reader)
            warnings += more
            if denied:
                raise E.forbidden(
                    f'admission webhook "{webhook_name(res.api_version, res.kind)}" denied the request: {E.aggregate_text(denied)}'
                )
        if hooks is not None and self.webhooks is not None and self.webhooks.may_validate(hooks):
            warnings += await self.webhooks.validate(hooks.with_object(obj))
        return obj, warnings

    def _webhook_attributes(
        self,
        res: ResourceDef,
        operation: Operation,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        opts: WriteOptions,
        subresource: str | None,
    ) -> AdmissionAttributes | None:
        if self.webhooks is None or operation not in ("CREATE", "UPDATE"):
            return None
        meta = obj["metadata"]
        return AdmissionAttributes(
            operation,
            res,
            subresource or "",
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            obj,
            old,
            opts.user,
            opts.dry_run,
            opts.field_manager,
        )

    # ==== update / patch / apply =========================================================
    async def replace(
        self,
        res: ResourceDef,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        opts: WriteOptions,
    ) -> Result:
        op = Op()
        old = self.get(res, namespace, name)
        if subresource == "scale":
            result = await self._write_scale(op, res, old, body, opts)
            await op.done()
            return result
        obj = self._check_body(res, body)
        if obj["metadata"].get("name", name) != name:
            raise E.bad_request(
                f"the name of the object ({obj['metadata'].get('name')}) does not match the name on the URL ({name})"
            )
        if not obj["metadata"].get("resourceVersion") and res.custom:
            raise E.invalid(
                res.group,
                res.kind,
                name,
                [FieldError("metadata.resourceVersion", "0x0: must be specified for an update")],
            )
        result = await self._update(op, res, old, obj, subresource, opts, "Update", None)
        await op.done()
        return result

    async def patch(
        self,
        res: ResourceDef,
        namespace: str | None,
        name: str,
        subresource: str | None,
        content_type: str,
        patch: Any,
        opts: WriteOptions,
    ) -> Result:
        # The patch type is checked before the object is looked up, as kube-apiserver does.
        if content_type not in (MERGE, JSON_PATCH, STRATEGIC, APPLY, APPLY_JSON) or (
            content_type == STRATEGIC and res.custom
        ):
            raise E.unsupported_media_type(content_type)
        for attempt in range(_RACE_RETRIES):
            try:
                return await self._patch_once(
                    res, namespace, name, subresource, content_type, patch, opts
                )
            except _Raced:
                # A patch names no version: like kube-apiserver's GuaranteedUpdate, apply it
                # again to what is stored now.
                if attempt == _RACE_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    async def _patch_once(
        self,
        res: ResourceDef,
        namespace: str | None,
        name: str,
        subresource: str | None,
        content_type: str,
        patch: Any,
        opts: WriteOptions,
    ) -> Result:
        op = Op()
        if subresource == "scale":
            old = self.get(res, namespace, name)
            current = scale_of(old)
            if content_type == JSON_PATCH:
                wanted = apply_json_patch(codec.clone(current), patch)
            elif isinstance(patch, dict) and content_type in (MERGE, STRATEGIC, APPLY, APPLY_JSON):
                # A Scale has no lists: every patch type but JSON patch merges the same way.
                wanted = merge_patch(current, patch)
            else:
                raise E.bad_request("a patch of the scale subresource must be a JSON object")
            result = await self._write_scale(op, res, old, wanted, opts)
        elif content_type in (APPLY, APPLY_JSON):
            result = await self._apply(op, res, namespace, name, subresource, patch, opts)
        else:
            old = self.get(res, namespace, name)
            if content_type == MERGE:
                if not isinstance(patch, dict):
                    raise E.bad_request("a merge patch must be a JSON object")
                candidate = merge_patch(old, patch)
            elif content_type == JSON_PATCH:
                candidate = apply_json_patch(codec.clone(old), patch)
            elif content_type == STRATEGIC:
                if res.custom:
                    raise E.unsupported_media_type(content_type)
                if not isinstance(patch, dict):
                    raise E.bad_request("a strategic merge patch must be a JSON object")
                candidate = strategic_merge_patch(old, patch, res.api_version, res.kind)
            else:
                raise E.unsupported_media_type(content_type)
            _immutable_identity(res, old, candidate)
            # A status write reads only the candidate's status (copied there) and metadata:
            # the rest, shared with the stored object, needs no copy.
            if subresource != "status":
                candidate = codec.clone(candidate)
            result = await self._update(op, res, old, candidate, subresource, opts, "Update", None)
        await op.done()
        return result

    async def _apply(
        self,
        op: Op,
        res: ResourceDef,
        namespace: str | None,
        name: str,
        subresource: str | None,
        applied: Any,
        opts: WriteOptions,
    ) -> Result:
        if not opts.field_manager:
            raise E.invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                [FieldError("fieldManager", "is required for apply patch", "Required")],
            )
        if not isinstance(applied, dict):
            raise E.bad_request("an apply patch must be an object")
        applied = self._check_body(res, applied)
        if applied["metadata"].get("name", name) != name:
            raise E.bad_request(
                f"the name of the object ({applied['metadata'].get('name')}) does not match the name on the URL ({name})"
            )
        applied["metadata"]["name"] = name
        old = self.store.get(res.key, ns_key(res, namespace), name)
        if old is None:
            if subresource:
                raise E.not_found(res.group, res.plural, name)
            # The request's body is the engine's own (decoded for it, changed above already).
            return await self._create(op, res, namespace, applied, opts, "Apply")
        if subresource == "status":
            config = {"status": applied.get("status") or {}}
        else:
            config = {k: v for k, v in applied.items() if not (k == "status" and res.has_status)}
        schema = self.schema.schema_of(res.api_version, res.kind)
        new_paths = ssa.owned_paths(config, schema)
        # What this manager applied before *through the same endpoint* (main or status).
        mine = manager_paths(old["metadata"], "Apply", subresource=subresource).get(
            opts.field_manager, set()
        )
        others = manager_paths(old["metadata"], exclude=opts.field_manager)
        if not opts.force:
            self._apply_conflicts(res, old, config, new_paths, others, opts.field_manager)
        candidate = ssa.apply_merge(codec.clone(old), codec.clone(config), schema)
        owned_by_others = set().union(*others.values()) if others else set()
        # Longest first, so an element's fields go before (and may empty) the element itself.
        for path in sorted(mine - new_paths - owned_by_others, key=len, reverse=True):
            if not any(path[: len(o)] == o or o[: len(path)] == path for o in owned_by_others):
                ssa.remove_path(candidate, path)
        precondition = applied["metadata"].get("resourceVersion")
        candidate["metadata"]["resourceVersion"] = (
            precondition or old["metadata"]["resourceVersion"]
        )
        return await self._update(op, res, old, candidate, subresource, opts, "Apply", new_paths)

    def _apply_conflicts(
        self,
        res: ResourceDef,
        old: dict[str, Any],
        config: dict[str, Any],
        paths: set[tuple[str, ...]],
        others: dict[str, set[tuple[str, ...]]],
        manager: str,
    ) -> None:
        # Only fields another *apply* manager owns, with a different value, conflict (approximation).
        appliers = manager_paths(old["metadata"], "Apply", exclude=manager)
        found: list[tuple[str, str]] = []
        for other, owned in appliers.items():
            for path in sorted(paths & owned):
                if ssa.value_at(old, path) != ssa.value_at(config, path):
                    found.append((other, "." + ".".join(path)))
        if found:
            text = "; ".join(f'conflict with "{m}": {p}' for m, p in found)
            count = len(found)
            err = E.conflict(res.group, res.plural, old["metadata"]["name"], "")
            err.message = f"Apply failed with {count} conflict{'s' if count > 1 else ''}: {text}"
            if err.details is not None:
                err.details["causes"] = [
                    {
                        "reason": "FieldManagerConflict",
                        "message": f'conflict with "{m}"',
                        "field": p,
                    }
                    for m, p in found
                ]
            raise err

    async def _update(
        self,
        op: Op,
        res: ResourceDef,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        opts: WriteOptions,
        operation: str,
        apply_paths: set[tuple[str, ...]] | None,
    ) -> Result:
        old_meta = old["metadata"]
        name = old_meta["name"]
        ns = old_meta.get("namespace", "")
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise E.bad_request("metadata must be an object")
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and str(wanted_rv) != old_meta["resourceVersion"]:
            raise E.conflict(res.group, res.plural, name, _MODIFIED)
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise E.conflict(
                res.group,
                res.plural,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}",
            )
        if subresource == "status":
            status = new.get("status")
            if self.schema.knows(res.api_version, res.kind) and not self.store.from_disk(old):
                # All but status and metadata stays the stored object's, shared (stored
                # objects are never changed in place): admission walks only what differs
                # from the old object, which its schema settled when it was written.
                new = dict(old)
                # managedFields stay shared (`record_manager` copies what it changes).
                new["metadata"] = codec.clone(
                    {k: v for k, v in old_meta.items() if k != "managedFields"}
                )
                if "managedFields" in old_meta:
                    new["metadata"]["managedFields"] = old_meta["managedFields"]
            else:
                new = codec.clone(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = codec.clone(status)
            meta = new["metadata"]
        else:
            if res.has_status:
                if "status" in old:
                    new["status"] = codec.clone(old["status"])
                else:
                    new.pop("status", None)
            for key in SERVER_FIELDS:
                if key in old_meta:
                    meta[key] = codec.clone(old_meta[key])
                else:
                    meta.pop(key, None)
            meta["name"] = name
            if res.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
                if added:
                    raise E.invalid(
                        res.group,
                        res.kind,
                        name,
                        [
                            FieldError(
                                "metadata.finalizers",
                                f"no new finalizers can be added if the object is being deleted, found new finalizers {sorted(added)}",
                                "Forbidden",
                            )
                        ],
                    )
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        new, warnings = await self._admit(res, "UPDATE", new, old, opts, subresource)
        current = self.store.get(res.key, ns, name)
        if current is None or current["metadata"]["resourceVersion"] != old_meta["resourceVersion"]:
            # Changed (or gone) while webhooks ran: as a storage precondition would, refuse.
            raise _Raced(res.group, res.plural, name)
        meta = new["metadata"]
        meta["resourceVersion"] = old_meta["resourceVersion"]
        # The stored entries, shared: `record_manager` replaces the entries it changes.
        meta["managedFields"] = list(old_meta.get("managedFields", []))
        manager = opts.field_manager or "unknown"
        if new == old and (
            apply_paths is None
            or manager_paths(old_meta, "Apply", subresource=subresource).get(manager) == apply_paths
        ):
            # A no-op write keeps the resourceVersion; an apply that only changes who owns
            # what still records it (shared ownership), as kube-apiserver does.
            return Result(old, 200, warnings)
        if res.has_generation and spec_part(new) != spec_part(old):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        now = self.clock()
        if apply_paths is not None:
            record_manager(
                meta, manager, "Apply", res.api_version, apply_paths, now, subresource, True
            )
        else:
            record_manager(
                meta,
                manager,
                "Update",
                res.api_version,
                changed_paths(new, old),
                now,
                subresource,
                False,
            )
        if opts.dry_run:
            return Result(new, 200, warnings)
        rv = self.store.next_rv()
        meta["resourceVersion"] = str(rv)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(op, res, new, rv)
        else:
            op.futures.append(self.store.put(Change(rv, "MODIFIED", res.key, ns, name, new, old)))
        return Result(new, 200, warnings)

    async def _write_scale(
        self, op: Op, res: ResourceDef, old: dict[str, Any], scale: Any, opts: WriteOptions
    ) -> Result:
        """Set ``spec.replicas`` from a Scale; the answer is the Scale after the write."""
        name = old["metadata"]["name"]
        replicas = replicas_of(scale, res.kind, name)
        candidate = codec.clone(old)
        candidate.setdefault("spec", {})["replicas"] = replicas
        wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
        candidate["metadata"]["resourceVersion"] = wanted_rv or old["metadata"]["resourceVersion"]
        result = await self._update(op, res, old, candidate, "scale", opts, "Update", None)
        return Result(scale_of(result.body), result.code, result.warnings)

    # ==== the ServiceAccount controller ====================================================
    def _ensure_default_service_account(self, op: Op, namespace: str) -> None:
        """A ``default`` ServiceAccount in ``namespace`` unless it has one or is terminating."""
        res = self.registry.by_kind("v1", "ServiceAccount")
        ns_obj = self.store.get("/namespaces", "", namespace)
        if res is None or ns_obj is None or ns_obj["metadata"].get("deletionTimestamp"):
            return
        if self.store.get(res.key, namespace, "default") is not None:
            return
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace},
        }
        # Written as the controller's own object, without admission: the engine's
        # controllers run inside the API server and must not wait on webhooks.
        opts = WriteOptions(field_manager="kube-controller-manager")
        self._store_created(op, res, namespace, "default", body, [], opts, "Update", None)

    async def settle_namespaces(self) -> None:
        """At start, what the controllers would catch up on: a ``default`` ServiceAccount in
        every namespace, and terminating namespaces finished once they are empty."""
        op = Op()
        for ns in self.store.items("/namespaces", None):
            self._ensure_default_service_account(op, ns["metadata"]["name"])
            self._finish_namespace(op, ns["metadata"]["name"])
        await op.done()

    async def settle_controllers(self) -> None:
        """Let the namespace controller's pending passes finish (before storage closes)."""
        while self._controller_tasks:
            await asyncio.gather(*list(self._controller_tasks), return_exceptions=True)

    def _settled(self, obj: dict[str, Any], old: dict[str, Any] | None) -> frozenset[str]:
        """The top-level fields an update leaves as this server stored them: they were pruned,
        defaulted and validated by the same schema then, so walking them again changes and
        finds nothing. Objects read from the database at start may predate the schema: they
        are walked whole, as every write was before."""
        if old is None or self.store.from_disk(old):
            return frozenset()
        return frozenset(
            k for k, v in obj.items() if k in old and isinstance(v, dict) and v == old[k]
        )

    # ==== start-up =======================================================================
    async def ensure(
        self, objects: Iterable[Mapping[str, Any]], manager: str = "kubetrain"
    ) -> list[str]:
        """Create each object unless one of that name exists; return what was created."""
        created = []
        for obj in objects:
            res = self.registry.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            if res is None:
                raise ValueError(f"no resource serves {obj.get('apiVersion')}/{obj.get('kind')}")
            meta = obj.get("metadata") or {}
            ns = ns_key(res, meta.get("namespace") or ("default" if res.namespaced else ""))
            if self.store.get(res.key, ns, meta.get("name", "")) is not None:
                continue
            await self.create(
                res, ns or None, codec.clone(dict(obj)), WriteOptions(field_manager=manager)
            )
            created.append(f"{res.kind}/{meta.get('name')}")
        return created


_RBAC_GROUP = "rbac.authorization.k8s.io"
_RACE_RETRIES = 5


class _Raced(E.ApiError):
    """The object changed while admission webhooks ran (a 409 unless the write is retried)."""

    def __init__(self, group: str, plural: str, name: str) -> None:
        err = E.conflict(group, plural, name, _MODIFIED)
        super().__init__(err.code, err.reason, err.message, err.details)


def _path_segment_errors(name: str) -> list[FieldError]:
    """kube-apiserver's ValidatePathSegmentName, the rule RBAC objects' names follow."""
    if name in (".", ".."):
        return [FieldError("metadata.name", f"\"{name}\": may not be '{name}'")]
    for bad in ("/", "%"):
        if bad in name:
            return [FieldError("metadata.name", f"\"{name}\": may not contain '{bad}'")]
    return []


def _encode_continue(rv: int, namespace: str, name: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [namespace, name]}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        ns, name = data["start"]
        return str(ns), str(name)
    except (ValueError, KeyError, TypeError) as exc:
        raise E.bad_request(f"continue key is not valid: {exc}") from exc


def _immutable_identity(res: ResourceDef, old: dict[str, Any], new: Any) -> None:
    """A patch may not rename or move an object: 422, as kube-apiserver answers."""
    before, after = (
        old.get("metadata") or {},
        (new or {}).get("metadata") if isinstance(new, dict) else None,
    )
    if not isinstance(after, dict):
        raise E.invalid(
            res.group,
            res.kind,
            before.get("name", ""),
            [FieldError("metadata", "Required value", "Required")],
        )
    errors = [
        FieldError(f"metadata.{key}", f'Invalid value: "{after.get(key)}": field is immutable')
        for key in ("name", "namespace", "uid")
        if key in before and after.get(key, before[key]) != before[key]
    ]
    if errors:
        raise E.invalid(res.group, res.kind, str(before.get("name", "")), errors)


def _set_defaults(obj: dict[str, Any], defaults: Mapping[str, Any]) -> None:
    """Fill what ``obj`` leaves out from ``defaults``, into nested maps too."""
    for key, value in defaults.items():
        if key not in obj:
            obj[key] = codec.clone(value)
        elif isinstance(value, Mapping) and isinstance(obj[key], dict):
            _set_defaults(obj[key], value)
