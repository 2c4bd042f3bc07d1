"""The HTTP face: Kubernetes REST paths → ``Engine`` calls, answers as JSON or Tables.

One catch-all route parses ``/api/v1/...`` and ``/apis/<group>/<version>/...`` itself, which
keeps path handling in one readable place. Every error answer is a ``Status`` with the content
type exactly ``application/json`` (lightkube maps errors only then).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from multidict import CIMultiDict

from kubetrain.api import codec
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver import protobuf
from kubetrain.local.apiserver.authz import USER_KEY, PolicyCache
from kubetrain.local.apiserver.conversions import VIEWS
from kubetrain.local.apiserver.discovery import (
    api_group,
    api_group_list,
    api_versions,
    resource_list,
    version_info,
)
from kubetrain.local.apiserver.engine import Engine, Result, WriteOptions
from kubetrain.local.apiserver.logs import LogRequest, log_file, pick_container, stream_log
from kubetrain.local.apiserver.openapi import OpenAPI
from kubetrain.local.apiserver.ops import ns_key
from kubetrain.local.apiserver.patching import apply_json_patch, merge_patch
from kubetrain.local.apiserver.rbac import (
    ADMIN,
    MASTERS,
    Attributes,
    User,
    forbidden_message,
    request_attributes,
)
from kubetrain.local.apiserver.resources import ResourceDef
from kubetrain.local.apiserver.scale import scale_of
from kubetrain.local.apiserver.selectors import (
    FieldSelector,
    parse_field_selector,
    parse_label_selector,
)
from kubetrain.local.apiserver.streaming import PodStreamer, serve_exec, serve_portforward
from kubetrain.local.apiserver.tables import table, wants_table
from kubetrain.local.apiserver.watch import CLOSED, Watch

__all__ = ["MAX_BODY_BYTES", "HttpApi", "Route", "error_response"]

# (method, path, handler) of an extra endpoint, as ``app.router.add_route`` takes them.
Route = tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]

log = logging.getLogger(__name__)

JSON = "application/json"
_PUBLIC = frozenset({"/version", "/healthz", "/livez", "/readyz"})
# What RBAC decided a request is (verb, resource, name, ...), kept for a second decision.
_ATTRIBUTES_KEY = web.RequestKey("kubetrain.attributes", Attributes)
_OBJECT_EVENTS = ("ADDED", "MODIFIED", "DELETED")
# A watch event's JSON up to its object, as ``{"type": ..., "object": ...}`` encodes.
_EVENT_HEAD = {t: b'{"type":"' + t.encode() + b'","object":' for t in _OBJECT_EVENTS}
_TRUE = ("true", "1")
# Subresources that stream to the kubelet instead of reading or writing the stored object.
_STREAMING = frozenset({"exec", "attach", "portforward"})
# The pause after a write to a watch, per event that write carried, up to the longest: events
# that come meanwhile go out in one write (one TLS record, one send and one wake-up of the
# client, one read for it). A watch that wrote one event waits 10 ms; one under load, writing
# many, waits up to 50 ms and so writes a fraction as often (5,000 TrainJobs through the
# controller: 50,000 events in 1,661 writes, not 6,931). An idle watch's first event goes out at
# once.
WATCH_WRITE_INTERVAL_S = 0.01
WATCH_WRITE_INTERVAL_MAX_S = 0.05
# kube-apiserver's largest request body (MaxRequestBodyBytes: 3 MiB).
MAX_BODY_BYTES = 3 * 1024 * 1024
# Deeper bodies are refused before anything walks them (the schema, copies, patches recurse);
# real Kubernetes objects nest a few dozen levels at most.
MAX_DEPTH = 100


def _dumps(body: Any) -> bytes:
    return codec.dumps(body)


def _respond(
    body: Any, code: int = 200, warnings: list[str] | None = None, encoded: bytes | None = None
) -> web.Response:
    headers: CIMultiDict[str] = CIMultiDict({"Content-Type": JSON})
    for text in warnings or ():
        # RFC 7234 warning, code 299, agent "-", the text quoted with \ escapes, as the apiserver does.
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        # Header values must be ASCII; escape the rest as the apiserver's sanitiser would.
        headers.add(
            "Warning", '299 - "' + quoted.encode("ascii", "backslashreplace").decode() + '"'
        )
    # kube-apiserver's JSON encoder ends every body with a newline; clients compare it.
    data = encoded if encoded is not None else _dumps(body)
    return web.Response(body=data + b"\n", status=code, headers=headers)


def error_response(err: E.ApiError) -> web.Response:
    """``err`` as kube-apiserver answers it: a Status, with its code."""
    return _respond(err.status(), err.code)


def _not_found_path() -> E.ApiError:
    return E.ApiError(404, "NotFound", "the server could not find the requested resource", {})


class HttpApi:
    """Routes and handlers; ``closing()`` makes watches and log follows end."""

    def __init__(
        self,
        engine: Engine,
        logs_dir: Path,
        tokens: frozenset[str] | None,
        bookmark_interval: float = 60.0,
        routes: Sequence[Route] = (),
        authenticator: Callable[[str], User | None] | None = None,
        authorizer: PolicyCache | None = None,
    ) -> None:
        self.engine = engine
        self.registry = engine.registry
        self.logs_dir = logs_dir
        self.tokens = tokens
        self.routes = list(routes)
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.bookmark_interval = bookmark_interval
        self.openapi = OpenAPI(engine.registry)
        self.watches: set[Watch] = set()
        self.closing = False
        self.server_address = "127.0.0.1:0"
        # The kubelet side of pods/exec, attach and portforward (the daemon registers it).
        self.streamer: PodStreamer | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        # Extra endpoints (TokenRequest, TokenReview) go before the catch-all, behind the same auth.
        for method, path, handler in self.routes:
            app.router.add_route(method, path, handler)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def answer(self, request: web.Request) -> web.StreamResponse:
        """What ``app()`` answers for a request of its catch-all route (authentication,
        authorization and errors included), for a front that parses requests itself."""
        response: web.StreamResponse = await self._middleware(request, self._dispatch)
        return response

    def close_streams(self) -> None:
        """End every open watch and log follow (before the runner's cleanup waits on them)."""
        self.closing = True
        for w in list(self.watches):
            w.close()

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        try:
            if self.tokens is not None and request.path.rstrip("/") not in _PUBLIC:
                user = self._authenticate(request)
                request[USER_KEY] = user
                if self.authorizer is not None:
                    self._authorize(request, user)
            response: web.StreamResponse = await handler(request)
            return response
        except E.ApiError as err:
            return error_response(err)
        except web.HTTPException:
            raise
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # every failure must still be a Status
            log.exception("internal error serving %s %s", request.method, request.path)
            return error_response(
                E.ApiError(500, "InternalError", f"Internal error occurred: {exc}")
            )

    def _authenticate(self, request: web.Request) -> User:
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.startswith("Bearer ") else ""
        if self.tokens is not None and token in self.tokens:
            return ADMIN
        user = self.authenticator(token) if token and self.authenticator else None
        if user is None:
            raise E.unauthorized()
        return user

    def _authorize(self, request: web.Request, user: User) -> None:
        assert self.authorizer is not None
        if MASTERS in user.groups:
            return  # the privileged-group authorizer, before RBAC builds anything
        attributes = request[_ATTRIBUTES_KEY] = request_attributes(
            request.method, request.path, request.query
        )
        decision = self.authorizer.authorize(user, attributes)
        if not decision.allowed:
            details: dict[str, Any] = {}
            if attributes.name:
                details["name"] = attributes.name
            if attributes.api_group:
                details["group"] = attributes.api_group
            if attributes.resource:
                details["kind"] = attributes.resource
            raise E.forbidden(forbidden_message(user, attributes, decision.reason), details)

    def _authorize_create_by_apply(
        self, request: web.Request, res: ResourceDef, namespace: str | None, name: str
    ) -> None:
        """An apply that creates its object needs ``create`` as well as ``patch``, as in
        kube-apiserver's patch handler (its message: the authorizer's reason alone)."""
        user = request.get(USER_KEY)
        if self.authorizer is None or user is None or MASTERS in user.groups:
            return
        if self.engine.store.get(res.key, ns_key(res, namespace), name) is not None:
            return
        attributes = request[_ATTRIBUTES_KEY].with_verb("create")
        decision = self.authorizer.authorize(user, attributes)
        if not decision.allowed:
            qualified = res.plural + (f".{res.group}" if res.group else "")
            raise E.forbidden(
                f'{qualified} "{name}" is forbidden: {decision.reason}',
                {"name": name, "group": res.group, "kind": res.plural},
            )

    # -- routing ---------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if request.method == "GET":
            fixed = self._fixed(path)
            if fixed is not None:
                return fixed
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found_path()
        if not rest:
            if request.method != "GET":
                raise E.method_not_allowed()
            listing = resource_list(self.registry, group, version)
            if listing is None:
                raise _not_found_path()
            return _respond(listing)
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (group == "" and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found_path()
        res = self.registry.get(group, version, rest[0])
        if res is None or (namespace is not None and not res.namespaced):
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources:
            raise _not_found_path()
        return await self._resource(request, res, namespace, name, sub, watch_path)

    def _fixed(self, path: str) -> web.Response | None:
        if path == "/version":
            return _respond(version_info())
        if path == "/api":
            return _respond(api_versions(self.server_address))
        if path == "/apis":
            return _respond(api_group_list(self.registry))
        if path.startswith("/apis/") and path.count("/") == 2:
            group = api_group(self.registry, path.split("/")[2])
            if group is None:
                raise _not_found_path()
            return _respond(group)
        if path == "/openapi/v3":
            return web.Response(body=self.openapi.index, headers={"Content-Type": JSON})
        if path.startswith("/openapi/v3/"):
            doc = self.openapi.document(path[len("/openapi/v3/") :])
            if doc is None:
                raise _not_found_path()
            return web.Response(
                body=doc, headers={"Content-Type": JSON, "Cache-Control": "public, immutable"}
            )
        if path == "/openapi/v2":
            # Only the protobuf form would help kubectl, and kubectl uses v3; say so plainly.
            raise E.ApiError(404, "NotFound", "openapi v2 is not served; use /openapi/v3")
        return None

    async def _resource(
        self,
        request: web.Request,
        res: ResourceDef,
        namespace: str | None,
        name: str | None,
        sub: str | None,
        watch_path: bool,
    ) -> web.StreamResponse:
        if res.view:
            return await self._view_resource(request, res, namespace, name, watch_path)
        q = request.query
        method = request.method
        if sub in _STREAMING and name is not None:
            return await self._stream(request, res, namespace, name, sub)
        if sub is not None and (method in ("POST", "DELETE") or (sub == "log" and method != "GET")):
            raise E.method_not_allowed()
        if method == "GET":
            if sub == "log":
                assert name is not None
                return await self._log(request, res, namespace, name)
            if name is None:
                labels = parse_label_selector(q.get("labelSelector"))
                fields = parse_field_selector(q.get("fieldSelector"), res.field_labels, res.kind)
                if watch_path or q.get("watch", "").lower() in _TRUE:
                    return await self._watch(request, res, namespace, labels, fields)
                listed = self.engine.list_objects(
                    res, namespace, labels, fields, _int(q.get("limit")), q.get("continue", "")
                )
                if wants_table(request.headers.get("Accept", "")):
                    return _respond(
                        table(
                            res,
                            listed["items"],
                            listed["metadata"],
                            q.get("includeObject", "Metadata"),
                        )
                    )
                return _respond(listed)
            obj = self.engine.get(res, namespace, name)
            if sub == "scale":
                return _respond(scale_of(obj))
            if wants_table(request.headers.get("Accept", "")):
                return _respond(
                    table(
                        res,
                        [obj],
                        {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                        q.get("includeObject", "Metadata"),
                    )
                )
            return _respond(obj, encoded=self.engine.store.encoded(obj))
        opts = WriteOptions(
            field_manager=q.get("fieldManager") or _default_manager(request),
            dry_run=q.get("dryRun") == "All",
            field_validation=_field_validation(q.get("fieldValidation")),
            force=q.get("force", "").lower() in _TRUE,
            user=request.get(USER_KEY),
        )
        if method == "POST":
            if name is not None:
                raise E.method_not_allowed()
            return self._answer(
                await self.engine.create(res, namespace, await _body(request), opts)
            )
        if method == "PUT":
            if name is None:
                raise E.method_not_allowed()
            return self._answer(
                await self.engine.replace(res, namespace, name, await _body(request), sub, opts)
            )
        if method == "PATCH":
            if name is None:
                raise E.method_not_allowed()
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type in ("application/apply-patch+yaml", "application/apply-patch+json"):
                if not q.get("fieldManager"):
                    opts.field_manager = ""
                if sub is None:
                    self._authorize_create_by_apply(request, res, namespace, name)
            return self._answer(
                await self.engine.patch(
                    res, namespace, name, sub, content_type, await _body(request), opts
                )
            )
        if method == "DELETE":
            options = await _body(request, optional=True) or {}
            if not isinstance(options, dict):
                raise E.bad_request("DeleteOptions must be an object")
            if q.get("propagationPolicy"):
                options["propagationPolicy"] = q["propagationPolicy"]
            if q.get("gracePeriodSeconds"):
                try:
                    options["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
                except ValueError:
                    raise E.bad_request("gracePeriodSeconds: must be an integer") from None
            if name is None:
                labels = parse_label_selector(q.get("labelSelector"))
                fields = parse_field_selector(q.get("fieldSelector"), res.field_labels, res.kind)
                return self._answer(
                    await self.engine.delete_collection(res, namespace, labels, fields, options)
                )
            dry = opts.dry_run or "All" in (options.get("dryRun") or [])
            return self._answer(
                await self.engine.delete(res, namespace, name, options, dry_run=dry)
            )
        raise E.method_not_allowed()

    async def _view_resource(
        self,
        request: web.Request,
        res: ResourceDef,
        namespace: str | None,
        name: str | None,
        watch_path: bool,
    ) -> web.StreamResponse:
        """A resource served as a view of another's objects: convert in, run, convert out."""
        view = VIEWS[res.view]
        stored = self.registry.get(*view.storage)
        assert stored is not None, f"{res.view} has no storage resource"
        q = request.query
        method = request.method
        table_wanted = wants_table(request.headers.get("Accept", ""))
        if method == "GET" and name is None:
            labels = parse_label_selector(q.get("labelSelector"))
            fields = parse_field_selector(q.get("fieldSelector"), res.field_labels, res.kind)
            if watch_path or q.get("watch", "").lower() in _TRUE:
                return await self._watch(
                    request,
                    res,
                    namespace,
                    labels,
                    fields,
                    stored=stored,
                    convert=view.from_storage,
                )
            listed = self.engine.list_objects(stored, namespace, labels, FieldSelector())
            items = [o for o in map(view.from_storage, listed["items"]) if fields.matches(o)]
            body = {
                "kind": res.list_kind,
                "apiVersion": res.api_version,
                "metadata": listed["metadata"],
                "items": items,
            }
            if table_wanted:
                return _respond(
                    table(res, items, listed["metadata"], q.get("includeObject", "Metadata"))
                )
            return _respond(body)
        if method == "GET":
            assert name is not None
            obj = view.from_storage(self.engine.get(stored, namespace, name))
            if table_wanted:
                return _respond(
                    table(
                        res, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                    )
                )
            return _respond(obj)
        opts = WriteOptions(
            field_manager=q.get("fieldManager") or _default_manager(request),
            dry_run=q.get("dryRun") == "All",
            field_validation=_field_validation(q.get("fieldValidation")),
            force=q.get("force", "").lower() in _TRUE,
            user=request.get(USER_KEY),
        )

        def inbound(body: Any) -> Any:
            if not isinstance(body, dict):
                raise E.bad_request("the request body must be a JSON object")
            if (
                body.get("apiVersion", res.api_version) != res.api_version
                or body.get("kind", res.kind) != res.kind
            ):
                raise E.bad_request(f"the body must be a {res.kind} of {res.api_version}")
            return view.to_storage(body)

        if method == "POST" and name is None:
            result = await self.engine.create(
                stored, namespace, inbound(await _body(request)), opts
            )
        elif method == "PUT" and name is not None:
            result = await self.engine.replace(
                stored, namespace, name, inbound(await _body(request)), None, opts
            )
        elif method == "PATCH" and name is not None:
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            patch = await _body(request)
            if content_type in ("application/apply-patch+yaml", "application/apply-patch+json"):
                if not q.get("fieldManager"):
                    opts.field_manager = ""
                self._authorize_create_by_apply(request, stored, namespace, name)
                result = await self.engine.patch(
                    stored, namespace, name, None, content_type, inbound(patch), opts
                )
            else:
                # Patch the served shape, then store the whole result (a PUT at the same version).
                current = view.from_storage(self.engine.get(stored, namespace, name))
                if content_type == "application/merge-patch+json" and isinstance(patch, dict):
                    candidate = merge_patch(current, patch)
                elif content_type == "application/json-patch+json":
                    candidate = apply_json_patch(current, patch)
                else:
                    raise E.unsupported_media_type(content_type)
                candidate.setdefault("metadata", {}).setdefault(
                    "resourceVersion", current["metadata"]["resourceVersion"]
                )
                result = await self.engine.replace(
                    stored, namespace, name, inbound(candidate), None, opts
                )
        elif method == "DELETE" and name is not None:
            options = await _body(request, optional=True) or {}
            if q.get("propagationPolicy"):
                options["propagationPolicy"] = q["propagationPolicy"]
            result = await self.engine.delete(
                stored, namespace, name, options, dry_run=opts.dry_run
            )
        else:
            raise E.method_not_allowed()
        if result.body.get("kind") == stored.kind:
            result.body = view.from_storage(result.body)
        elif result.body.get("kind") == "Status" and "details" in result.body:
            # A delete's Status names the resource as served (its group), not its storage.
            details = result.body["details"]
            result.body["details"] = {
                "name": details.get("name"),
                **({"group": res.group} if res.group else {}),
                **{k: v for k, v in details.items() if k not in ("name", "group")},
            }
        return self._answer(result)

    def _answer(self, result: Result) -> web.Response:
        # A written object's answer reuses the JSON the store encoded it to.
        encoded = self.engine.store.encoded(result.body) if result.code in (200, 201) else None
        return _respond(result.body, result.code, result.warnings, encoded)

    # -- watch -----------------------------------------------------------------------------
    async def _watch(
        self,
        request: web.Request,
        res: ResourceDef,
        namespace: str | None,
        labels: Any,
        fields: Any,
        *,
        stored: ResourceDef | None = None,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> web.StreamResponse:
        q = request.query
        as_table = wants_table(request.headers.get("Accept", ""))
        include = q.get("includeObject", "Metadata")
        store = self.engine.store
        w = Watch(store, stored or res, namespace, labels, fields, convert=convert, served=res)
        w.start(q.get("resourceVersion"), q.get("sendInitialEvents", "").lower() in _TRUE)
        self.watches.add(w)
        if self.closing:
            w.close()
        timeout = _int(q.get("timeoutSeconds"), "timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks", "").lower() in _TRUE
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else math.inf
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            while True:
                wait = deadline - loop.time()
                if bookmarks:
                    wait = min(wait, self.bookmark_interval)
                if wait <= 0:
                    break
                try:
                    if w.queue.empty():
                        # asyncio.timeout, not wait_for: no task per wake-up of every watch.
                        async with asyncio.timeout(None if math.isinf(wait) else wait):
                            event = await w.queue.get()
                    else:
                        event = w.queue.get_nowait()
                except TimeoutError:
                    if loop.time() >= deadline:
                        break
                    event = w.bookmark()
                events = [event]
                while not w.queue.empty() and len(events) < 500:
                    events.append(w.queue.get_nowait())
                chunk = []
                done = False
                for ev in events:
                    if ev is CLOSED:
                        done = True
                        break
                    if (
                        ev["type"] == "BOOKMARK"
                        and not bookmarks
                        and "annotations" not in ev["object"]["metadata"]
                    ):
                        continue
                    if as_table and ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        obj = ev["object"]
                        ev = {
                            "type": ev["type"],
                            "object": table(
                                res,
                                [obj],
                                {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                                include,
                            ),
                        }
                    elif convert is None and ev["type"] in _OBJECT_EVENTS:
                        # The object's JSON is the store's, encoded once for every watcher.
                        chunk.append(_EVENT_HEAD[ev["type"]] + store.encoded(ev["object"]) + b"}\n")
                        continue
                    chunk.append(_dumps(ev) + b"\n")
                if chunk:
                    await response.write(b"".join(chunk))
                if done:
                    break
                if chunk and w.queue.empty():
                    # Let the next events gather (see WATCH_WRITE_INTERVAL_S); what is queued
                    # already goes out now, as kube-apiserver flushes only an emptied queue.
                    await asyncio.sleep(
                        min(WATCH_WRITE_INTERVAL_MAX_S, WATCH_WRITE_INTERVAL_S * len(chunk))
                    )
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            w.close()
            self.watches.discard(w)
        return response

    # -- logs ------------------------------------------------------------------------------
    async def _log(
        self, request: web.Request, res: ResourceDef, namespace: str | None, name: str
    ) -> web.StreamResponse:
        pod = self.engine.get(res, namespace, name)
        req = LogRequest(request.query)
        container = pick_container(pod, req.container)
        ns = pod["metadata"].get("namespace", "")
        path = log_file(self.logs_dir, ns, name, container, req.previous)
        if path is None:
            raise E.bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if not path.exists() and phase == "Pending":
            raise E.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        uid = pod["metadata"].get("uid")
        store = self.engine.store

        def finished() -> bool:
            now = store.get(res.key, ns, name)
            if now is None or now["metadata"].get("uid") != uid:
                return True
            return (now.get("status") or {}).get("phase") in ("Succeeded", "Failed")

        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        if req.follow:
            response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async for chunk in stream_log(path, req, finished, lambda: self.closing):
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    # -- exec, attach, portforward ----------------------------------------------------------
    async def _stream(
        self, request: web.Request, res: ResourceDef, namespace: str | None, name: str, sub: str
    ) -> web.StreamResponse:
        if request.method not in ("GET", "POST"):
            raise E.method_not_allowed()
        pod = self.engine.get(res, namespace, name)
        if not (pod.get("spec") or {}).get("nodeName"):
            raise E.bad_request(f"pod {name} does not have a host assigned")
        container = ""
        if sub != "portforward":
            container = pick_container(pod, request.query.get("container", ""))
        if self.streamer is None:
            raise E.ApiError(
                503,
                "ServiceUnavailable",
                "no kubelet serves this API server (it runs without the executor)",
            )
        if sub == "portforward":
            return await serve_portforward(request, self.streamer, pod)
        return await serve_exec(request, self.streamer, pod, container, attach=sub == "attach")


def _int(value: str | None, name: str = "limit") -> int:
    if not value:
        return 0
    try:
        number = int(value)
    except ValueError as exc:
        raise E.bad_request(f"{name}: invalid integer {value!r}") from exc
    if number < 0:
        raise E.bad_request(f"{name}: Invalid value: {number}: must be greater than or equal to 0")
    return number


def _depth(obj: Any) -> int:
    """How deeply ``obj`` nests (iteratively: the point is not to recurse on it)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return deepest


def _decoded(obj: Any) -> Any:
    if _depth(obj) > MAX_DEPTH:
        raise E.bad_request(f"the body nests deeper than {MAX_DEPTH} levels")
    return obj


def _field_validation(value: str | None) -> str:
    if not value:
        return "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise E.bad_request(f"fieldValidation must be one of Ignore, Warn or Strict, got {value!r}")
    return value


def _default_manager(request: web.Request) -> str:
    # Like kube-apiserver: the user agent's product name when the client names no manager.
    agent = request.headers.get("User-Agent", "")
    return agent.split("/")[0][:128] if agent else "unknown"


async def _body(request: web.Request, optional: bool = False) -> Any:
    content_type = request.headers.get("Content-Type", "")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise E.ApiError(
            413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY_BYTES}"
        ) from None
    if "protobuf" in content_type or "cbor" in content_type:
        # kubectl 1.32+ sends its typed creates as protobuf; those few kinds are understood.
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError as exc:
            raise E.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f'application/json, application/yaml ({exc}; got "{content_type}")',
            ) from exc
    if not raw.strip():
        if optional:
            return None
        raise E.bad_request("the request has no body")
    try:
        body = codec.loads(raw)
        # A JSON document nests no deeper than it has brackets: most bodies need no walk.
        return body if raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH else _decoded(body)
    except RecursionError:
        raise E.bad_request(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except codec.DecodeError:
        pass
    try:
        return _decoded(yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except RecursionError:
        raise E.bad_request(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        raise E.bad_request(f"the body could not be decoded: {exc}") from exc
