"""Admission webhooks called as kube-apiserver calls them, from the stored configurations.

For every create and update the engine asks `WebhookDispatcher.mutate` (after the in-process
admission's mutation) and `WebhookDispatcher.validate` (after validation). Which webhooks apply
is decided by `applies` from each ``MutatingWebhookConfiguration`` /
``ValidatingWebhookConfiguration``: ``rules`` (operations, apiGroups, apiVersions, resources with
``sub``/``*`` forms, ``scope``), ``namespaceSelector`` and ``objectSelector``. Each call is an
AdmissionReview v1 over HTTPS, verified against the webhook's ``caBundle``, to its ``url`` or
to its ``service`` resolved to a ready pod behind the Service (what kube-apiserver's service
resolver does), with ``timeoutSeconds`` (default 10), on keep-alive connections of
``kube.http1`` (one pool per address, verified name and CA). Where pods run next to this server, the
call reaches the pod through the kubelet's ``dial`` (the pod's own network namespace), as
kube-apiserver reaches pod IPs over the cluster network; this process has no route to them. Mutations are JSONPatches applied in
order (configurations by name, webhooks in order); a webhook with ``reinvocationPolicy:
IfNeeded`` is called once more when a later one changed the object. Validating webhooks run
concurrently; the first denial in order wins. A call that fails follows ``failurePolicy``
(``Fail`` by default): the request is refused with kube-apiserver's message, nothing is stored.
A dry-run request refuses webhooks with side effects.

Not done here: ``matchConditions`` (CEL; a webhook that has them fails its call, so its
``failurePolicy`` decides), conversion for ``matchPolicy: Equivalent`` (every kind is served in
one version here, so Exact and Equivalent select the same), and DELETE/CONNECT operations.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.api import codec
from kubetrain.api.access import as_dict, as_list
from kubetrain.kube import http1
from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver.meta import new_uid
from kubetrain.local.apiserver.patching import apply_json_patch
from kubetrain.local.apiserver.rbac import User, user_info
from kubetrain.local.apiserver.resources import ResourceDef
from kubetrain.local.apiserver.selectors import label_selector
from kubetrain.local.apiserver.store import Change, Store

if TYPE_CHECKING:
    from kubetrain.local.apiserver.streaming import PortStream

# The kubelet's connection to one port of a pod (the pod object, the port).
PodDialer = Callable[[Mapping[str, Any], int], Awaitable["PortStream"]]

__all__ = [
    "AdmissionAttributes",
    "WebhookDispatcher",
    "applies",
    "call_failed",
    "denial",
    "review_request",
]

ADMISSION_V1 = "admission.k8s.io/v1"
_GROUP = "admissionregistration.k8s.io"
MUTATING_KEY = f"{_GROUP}/mutatingwebhookconfigurations"
VALIDATING_KEY = f"{_GROUP}/validatingwebhookconfigurations"
DEFAULT_TIMEOUT_S = 10
_NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_MAX_RESPONSE = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AdmissionAttributes:
    """One write as admission sees it."""

    operation: str  # CREATE | UPDATE
    resource: ResourceDef
    subresource: str
    namespace: str
    name: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    user: User | None = None
    dry_run: bool = False
    field_manager: str = ""

    def with_object(self, obj: Mapping[str, Any]) -> AdmissionAttributes:
        """The same request about ``obj`` (``dataclasses.replace`` costs several times more)."""
        return AdmissionAttributes(
            self.operation, self.resource, self.subresource, self.namespace, self.name,
            obj, self.old, self.user, self.dry_run, self.field_manager,
        )  # fmt: skip


# -- which webhooks apply (pure) ---------------------------------------------------------------


def _listed(values: Sequence[Any], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def _rule_matches(rule: Mapping[str, Any], attrs: AdmissionAttributes) -> bool:
    res = attrs.resource
    if not _listed(as_list(rule.get("operations")), attrs.operation):
        return False
    if not _listed(as_list(rule.get("apiGroups")), res.group):
        return False
    if not _listed(as_list(rule.get("apiVersions")), res.version):
        return False
    resource_ok = False
    for entry in as_list(rule.get("resources")):
        name, _, sub = str(entry).partition("/")
        if name in ("*", res.plural) and sub in ("*", attrs.subresource):
            resource_ok = True
            break
    if not resource_ok:
        return False
    scope = rule.get("scope") or "*"
    is_namespace = res.plural == "namespaces" and res.group == ""
    if scope == "Namespaced":
        return not is_namespace and bool(attrs.namespace)
    if scope == "Cluster":
        return is_namespace or not attrs.namespace
    return True


def _labels(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return as_dict(as_dict((obj or {}).get("metadata")).get("labels"))


def applies(
    webhook: Mapping[str, Any],
    attrs: AdmissionAttributes,
    namespace_object: Mapping[str, Any] | None,
) -> bool:
    """Whether ``webhook`` is called for ``attrs`` (``namespace_object``: the request's
    namespace, or None for cluster-scoped objects)."""
    return _rules_match(webhook, attrs) and _selected(webhook, attrs, namespace_object)


def _rules_match(webhook: Mapping[str, Any], attrs: AdmissionAttributes) -> bool:
    """Whether one of the webhook's rules names the request (what `_rule_key` holds)."""
    return any(_rule_matches(as_dict(r), attrs) for r in as_list(webhook.get("rules")))


# operation, group, version, plural, subresource, namespaced
_RuleKey = tuple[str, str, str, str, str, bool]


def _rule_key(attrs: AdmissionAttributes) -> _RuleKey:
    """Everything of a request that the rules look at."""
    res = attrs.resource
    return (
        attrs.operation,
        res.group,
        res.version,
        res.plural,
        attrs.subresource,
        bool(attrs.namespace),
    )


def _selected(
    webhook: Mapping[str, Any],
    attrs: AdmissionAttributes,
    namespace_object: Mapping[str, Any] | None,
) -> bool:
    """Whether the webhook's namespace and object selectors select the request."""
    res = attrs.resource
    is_namespace = res.plural == "namespaces" and res.group == ""
    ns_selector = webhook.get("namespaceSelector")
    if isinstance(ns_selector, dict) and (attrs.namespace or is_namespace):
        # A Namespace is selected by its own labels; other cluster-scoped objects never are excluded.
        labels_of = attrs.obj if is_namespace else namespace_object
        if not label_selector(ns_selector).matches({"metadata": {"labels": _labels(labels_of)}}):
            return False
    obj_selector = webhook.get("objectSelector")
    if isinstance(obj_selector, dict) and (
        obj_selector.get("matchLabels") or obj_selector.get("matchExpressions")
    ):
        selector = label_selector(obj_selector)
        candidates = [o for o in (attrs.obj, attrs.old) if o is not None]
        if not any(selector.matches({"metadata": {"labels": _labels(o)}}) for o in candidates):
            return False
    return True


def review_request(attrs: AdmissionAttributes, uid: str) -> dict[str, Any]:
    """The AdmissionReview v1 kube-apiserver sends for ``attrs``."""
    res = attrs.resource
    kind = {"group": res.group, "version": res.version, "kind": res.kind}
    resource = {"group": res.group, "version": res.version, "resource": res.plural}
    request: dict[str, Any] = {
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = attrs.operation
    request["userInfo"] = user_info(attrs.user or User(""))
    request["object"] = attrs.obj
    request["oldObject"] = attrs.old
    request["dryRun"] = attrs.dry_run
    options: dict[str, Any] = {
        "kind": "CreateOptions" if attrs.operation == "CREATE" else "UpdateOptions",
        "apiVersion": "meta.k8s.io/v1",
    }
    if attrs.field_manager:
        options["fieldManager"] = attrs.field_manager
    request["options"] = options
    return {"kind": "AdmissionReview", "apiVersion": ADMISSION_V1, "request": request}


def denial(webhook_name: str, status: Mapping[str, Any]) -> E.ApiError:
    """kube-apiserver's error for a webhook that did not allow (webhookerrors.ToStatusErr)."""
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    code = int(status.get("code") or 0)
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    details = as_dict(status.get("details")) or None
    return E.ApiError(max(code, 400), str(status.get("reason") or ""), message, details)


def call_failed(webhook_name: str, cause: str) -> E.ApiError:
    """kube-apiserver's 500 for a webhook it could not call (failurePolicy Fail)."""
    text = f'failed calling webhook "{webhook_name}": {cause}'
    return E.ApiError(
        500, "InternalError", f"Internal error occurred: {text}", {"causes": [{"message": text}]}
    )


# -- calling them --------------------------------------------------------------------------


class _CallError(Exception):
    """Why a webhook could not be called; the text follows kube-apiserver's wording."""


@dataclass
class _Target:
    server: str  # scheme://host:port connected to
    path: str
    shown_url: str
    server_hostname: str | None
    # The pod and port behind a Service: dialled through the kubelet when one is attached.
    pod: Mapping[str, Any] | None = None
    pod_port: int = 0


# A pool's own timeout only bounds a silence; a call's deadline is its `timeoutSeconds`,
# at most 30 s in kube-apiserver's validation.
_POOL_TIMEOUT_S = 30.0
# Pools kept open at most, the least recently used closed first.
_POOLS_KEPT = 32


@dataclass
class WebhookDispatcher:
    """Calls the webhooks of the configurations stored in ``store``."""

    store: Store
    calls: int = field(default=0, init=False)
    # Set by the server when pods run next to it (ApiServer.serve_pod_streams).
    dial: PodDialer | None = field(default=None, init=False)
    # Keep-alive connections by (address, verified name, caBundle), as kube-apiserver keeps one
    # client per webhook's configuration.
    _pools: dict[tuple[str, str | None, str], http1.Pool] = field(default_factory=dict, init=False)
    _closing: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _contexts: dict[str, ssl.SSLContext] = field(default_factory=dict, init=False)
    # The webhooks whose rules match, by configuration kind and `_rule_key`: rebuilt after a
    # configuration changes (as kube-apiserver's informer-fed cache is), so that the writes
    # no configuration names cost a dictionary lookup.
    _by_rules: dict[tuple[str, _RuleKey], list[dict[str, Any]]] = field(
        default_factory=dict, init=False
    )
    # A Service's ready pod and port by (name, namespace, port), found since Services and Pods
    # were last written (`Store.writes` then): a lookup instead of a walk over every pod per call.
    _endpoints: dict[tuple[str, str, int], tuple[Mapping[str, Any], int]] = field(
        default_factory=dict, init=False
    )
    _endpoints_writes: tuple[int, int] = field(default=(-1, -1), init=False)

    def __post_init__(self) -> None:
        self.store.subscribe(self._changed)

    def _changed(self, change: Change) -> None:
        if change.resource in (MUTATING_KEY, VALIDATING_KEY):
            self._by_rules.clear()

    def _configured(self, key: str) -> list[dict[str, Any]]:
        hooks: list[dict[str, Any]] = []
        for config in self.store.items(key):  # sorted by name, as kube-apiserver orders them
            hooks += [as_dict(w) for w in as_list(config.get("webhooks"))]
        return hooks

    def _named(self, key: str, attrs: AdmissionAttributes) -> list[dict[str, Any]]:
        """The webhooks whose rules name the request (selectors not looked at yet)."""
        if attrs.resource.group == _GROUP:
            return []  # webhook configurations are never admitted by webhooks
        cache_key = (key, _rule_key(attrs))
        hooks = self._by_rules.get(cache_key)
        if hooks is None:
            hooks = [w for w in self._configured(key) if _rules_match(w, attrs)]
            self._by_rules[cache_key] = hooks
        return hooks

    def _matching(self, key: str, attrs: AdmissionAttributes) -> list[dict[str, Any]]:
        hooks = self._named(key, attrs)
        if not hooks:
            return []
        namespace = self.store.get("/namespaces", "", attrs.namespace) if attrs.namespace else None
        return [w for w in hooks if _selected(w, attrs, namespace)]

    def may_validate(self, attrs: AdmissionAttributes) -> bool:
        """Whether a validating webhook's rules name this request (selectors not looked at)."""
        return bool(self._named(VALIDATING_KEY, attrs))

    async def mutate(self, attrs: AdmissionAttributes) -> tuple[dict[str, Any] | None, list[str]]:
        """The object after the mutating webhooks (None: none applied) and their warnings."""
        hooks = self._matching(MUTATING_KEY, attrs)
        if not hooks:
            return None, []
        obj = codec.clone(dict(attrs.obj or {}))
        warnings: list[str] = []
        changed_after: dict[int, bool] = {}
        for index, hook in enumerate(hooks):
            patched = await self._mutate_one(hook, attrs, obj, warnings)
            if patched is not None and patched != obj:
                obj = patched
                for earlier in changed_after:
                    changed_after[earlier] = True
            changed_after[index] = False
        for index, hook in enumerate(hooks):
            if hook.get("reinvocationPolicy") == "IfNeeded" and changed_after.get(index):
                patched = await self._mutate_one(hook, attrs, obj, warnings)
                if patched is not None:
                    obj = patched
        return obj, warnings

    async def _mutate_one(
        self,
        hook: dict[str, Any],
        attrs: AdmissionAttributes,
        obj: dict[str, Any],
        warnings: list[str],
    ) -> dict[str, Any] | None:
        response = await self._call(hook, attrs.with_object(obj))
        if response is None:
            return None
        warnings += [str(w) for w in as_list(response.get("warnings"))]
        if not response.get("allowed"):
            raise denial(str(hook.get("name")), as_dict(response.get("status")))
        patch = response.get("patch")
        if not patch:
            return None
        name = str(hook.get("name"))
        if response.get("patchType") != "JSONPatch":
            raise call_failed(name, f"unsupported patch type {response.get('patchType')!r}")
        try:
            operations = json.loads(base64.b64decode(str(patch), validate=True))
            return apply_json_patch(codec.clone(obj), operations)
        except (ValueError, binascii.Error) as err:
            raise call_failed(name, f"received invalid webhook response: {err}") from None
        except E.ApiError as err:
            raise E.ApiError(
                500, "InternalError", f"Internal error occurred: {err.message}"
            ) from None

    async def validate(self, attrs: AdmissionAttributes) -> list[str]:
        """Call every validating webhook that applies, concurrently; raise the first denial."""
        hooks = self._matching(VALIDATING_KEY, attrs)
        if not hooks:
            return []
        answers: list[dict[str, Any] | BaseException | None]
        if len(hooks) == 1:
            answers = [await self._call(hooks[0], attrs)]  # no task to run one call in
        else:
            answers = await asyncio.gather(
                *(self._call(h, attrs) for h in hooks), return_exceptions=True
            )
        warnings: list[str] = []
        for hook, answer in zip(hooks, answers, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            if answer is None:
                continue
            warnings += [str(w) for w in as_list(answer.get("warnings"))]
            if not answer.get("allowed"):
                raise denial(str(hook.get("name")), as_dict(answer.get("status")))
        return warnings

    async def _call(
        self, hook: Mapping[str, Any], attrs: AdmissionAttributes
    ) -> dict[str, Any] | None:
        """The webhook's ``response``; None when a failed call is ignored (failurePolicy Ignore)."""
        name = str(hook.get("name"))
        if attrs.dry_run and hook.get("sideEffects") not in _NO_SIDE_EFFECTS:
            raise E.bad_request(f'admission webhook "{name}" does not support dry run')
        try:
            if hook.get("matchConditions"):
                raise _CallError("matchConditions are not supported by this API server")
            return await self._post(hook, attrs)
        except _CallError as err:
            if hook.get("failurePolicy") == "Ignore":
                return None
            raise call_failed(name, str(err)) from None

    async def _post(self, hook: Mapping[str, Any], attrs: AdmissionAttributes) -> dict[str, Any]:
        timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_S)
        config = as_dict(hook.get("clientConfig"))
        target = self._target(config, timeout)
        ca_bundle = str(config.get("caBundle") or "")
        context = self._context(ca_bundle)
        uid = new_uid()
        body = codec.dumps(review_request(attrs, uid))
        self.calls += 1
        failed = f'failed to call webhook: Post "{target.shown_url}"'
        try:
            async with asyncio.timeout(timeout):
                if target.pod is not None and self.dial is not None:
                    answer = await self._post_through_kubelet(target, timeout, body, context)
                else:
                    pool = self._pool_for(target, ca_bundle, context)
                    answer = await _send(pool, target.path, timeout, body)
        except TimeoutError:
            raise _CallError(f"{failed}: context deadline exceeded") from None
        except ssl.SSLCertVerificationError as err:
            raise _CallError(f"{failed}: tls: failed to verify certificate: {err}") from None
        except http1.ConnectError as err:
            # Go words it "connect: connection refused": the errno's text, lower case.
            errno = err.os_error.errno
            why = os.strerror(errno).lower() if errno else str(err.os_error)
            raise _CallError(f"{failed}: dial tcp {err.host}:{err.port}: connect: {why}") from None
        except http1.AnswerTooLarge:
            raise _CallError(
                "received invalid webhook response: the response is too large"
            ) from None
        except OSError as err:
            raise _CallError(f"{failed}: {err}") from None
        status = answer.status
        if status < 200 or status >= 300:
            raise _CallError(
                f"received invalid webhook response: the server responded with status {status}"
            )
        try:
            review = codec.loads(answer.body)
        except codec.DecodeError as err:
            raise _CallError(f"received invalid webhook response: {err}") from None
        if not isinstance(review, dict) or (review.get("apiVersion"), review.get("kind")) != (
            ADMISSION_V1,
            "AdmissionReview",
        ):
            raise _CallError(
                "received invalid webhook response: expected webhook response of "
                "admission.k8s.io/v1, Kind=AdmissionReview"
            )
        response_part = review.get("response")
        if not isinstance(response_part, dict):
            raise _CallError("webhook response was absent")
        if response_part.get("uid") != uid:
            raise _CallError(
                f'received invalid webhook response: expected response.uid="{uid}", got "{response_part.get("uid")}"'
            )
        return response_part

    def _pool_for(self, target: _Target, ca_bundle: str, context: ssl.SSLContext) -> http1.Pool:
        """The keep-alive pool of this address, name and CA, most recently used last; beyond
        ``_POOLS_KEPT`` the least recently used is closed (webhook pods come and go, each
        with an address of its own)."""
        key = (target.server, target.server_hostname, ca_bundle)
        pool = self._pools.pop(key, None) or _pool(target.server, target.server_hostname, context)
        self._pools[key] = pool
        if len(self._pools) > _POOLS_KEPT:
            oldest = next(iter(self._pools))
            closing = asyncio.create_task(self._pools.pop(oldest).close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        return pool

    async def _post_through_kubelet(
        self, target: _Target, timeout: int, body: bytes, context: ssl.SSLContext
    ) -> http1.Answer:
        assert target.pod is not None and self.dial is not None
        # One connection per call: the relay ends with it.
        async with _through_kubelet(self.dial, target.pod, target.pod_port) as relay:
            pool = _pool(f"https://127.0.0.1:{relay.port}", target.server_hostname, context)
            try:
                return await _send(pool, target.path, timeout, body)
            except OSError:
                # The relay closes the call's connection when it cannot reach the pod's port:
                # say why, as kube-apiserver names the dial that failed.
                if relay.failed:
                    address = target.server.removeprefix("https://")
                    raise _CallError(
                        f'failed to call webhook: Post "{target.shown_url}": '
                        f"dial tcp {address}: {relay.failed}"
                    ) from None
                raise
            finally:
                await pool.close()

    def _target(self, config: Mapping[str, Any], timeout: int) -> _Target:
        query = f"?timeout={timeout}s"
        if config.get("url"):
            url = str(config["url"])
            parts = urllib.parse.urlsplit(url)
            server = f"{parts.scheme}://{parts.netloc}"
            return _Target(server, parts.path or "/", url + query, None)
        service = as_dict(config.get("service"))
        name, namespace = str(service.get("name") or ""), str(service.get("namespace") or "")
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        host = f"{name}.{namespace}.svc"
        shown = f"https://{host}:{port}{path}{query}"
        pod, number = self._resolve(name, namespace, port, shown)
        address = f"{as_dict(pod.get('status'))['podIP']}:{number}"
        return _Target(f"https://{address}", path, shown, host, pod, number)

    def _resolve(
        self, name: str, namespace: str, port: int, shown: str
    ) -> tuple[Mapping[str, Any], int]:
        """A ready pod behind the Service and its port (kube-apiserver's service resolver)."""
        writes = (self.store.writes("/services"), self.store.writes("/pods"))
        if writes != self._endpoints_writes:
            self._endpoints.clear()
            self._endpoints_writes = writes
        known = self._endpoints.get((name, namespace, port))
        if known is None:
            known = self._endpoints[(name, namespace, port)] = self._endpoint(
                name, namespace, port, shown
            )
        return known

    def _endpoint(
        self, name: str, namespace: str, port: int, shown: str
    ) -> tuple[Mapping[str, Any], int]:
        failed = f'failed to call webhook: Post "{shown}"'
        svc = self.store.get("/services", namespace, name)
        if svc is None:
            raise _CallError(f'{failed}: service "{name}" not found')
        spec = as_dict(svc.get("spec"))
        service_port = next(
            (as_dict(p) for p in as_list(spec.get("ports")) if as_dict(p).get("port") == port), None
        )
        if service_port is None:
            raise _CallError(f'{failed}: no service port {port} found for service "{name}"')
        selector = {str(k): str(v) for k, v in as_dict(spec.get("selector")).items()}
        target = service_port.get("targetPort", port)
        for pod in self.store.items("/pods", namespace):
            meta = as_dict(pod.get("metadata"))
            labels = as_dict(meta.get("labels"))
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                continue
            status = as_dict(pod.get("status"))
            ready = any(
                as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True"
                for c in as_list(status.get("conditions"))
            )
            if not ready or not status.get("podIP") or meta.get("deletionTimestamp"):
                continue
            number = _container_port(pod, target)
            if number is not None:
                return pod, number
        raise _CallError(f'{failed}: no endpoints available for service "{name}"')

    def _context(self, ca_bundle: str) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle, validate=True).decode()
                    context = ssl.create_default_context(cadata=pem)
                except (ValueError, binascii.Error, ssl.SSLError) as err:
                    raise _CallError(
                        f"could not get REST client: unable to load root certificates: {err}"
                    ) from None
            else:
                context = ssl.create_default_context()
            self._contexts[ca_bundle] = context
        return context

    async def close(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


@dataclass
class _Relay:
    port: int  # on 127.0.0.1
    failed: str = ""  # why the pod's port could not be reached, once the relay knows


@contextlib.asynccontextmanager
async def _through_kubelet(
    dial: PodDialer, pod: Mapping[str, Any], port: int
) -> AsyncIterator[_Relay]:
    """A loopback port relayed to ``port`` of ``pod`` through the kubelet, for one call."""
    state = _Relay(0)

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            conn = await dial(pod, port)
        except Exception as err:  # the kubelet's words: the pod is not running, ...
            state.failed = str(err) or type(err).__name__
            writer.close()  # the client sees the connection end: a failed call
            return

        async def upstream() -> None:
            while data := await reader.read(65536):
                await conn.write(data)
            conn.write_eof()

        async def downstream() -> None:
            answered = False
            while data := await conn.reader.read(65536):
                answered = True
                writer.write(data)
                await writer.drain()
            if not answered:  # known before the client sees the end, so it can tell why
                state.failed = await conn.error()
            writer.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()
            writer.close()

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    state.port = int(server.sockets[0].getsockname()[1])
    try:
        yield state
    finally:
        server.close()


_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def _pool(server: str, server_hostname: str | None, context: ssl.SSLContext) -> http1.Pool:
    return http1.Pool(
        server,
        context,
        timeout=_POOL_TIMEOUT_S,
        user_agent="kube-apiserver-admission",
        server_hostname=server_hostname,
        max_answer=_MAX_RESPONSE,
    )


async def _send(pool: http1.Pool, path: str, timeout: int, body: bytes) -> http1.Answer:
    """POST ``body`` to ``path`` with kube-apiserver's ``timeout`` parameter. A review may be
    sent again (once, by the pool's rule) when a kept-alive connection the webhook server
    closed as idle broke just as it was reused: asking the same question twice changes nothing."""
    return await pool.request(
        "POST",
        path,
        params={"timeout": f"{timeout}s"},
        headers=_HEADERS,
        content=body,
        resendable=True,
    )


def _container_port(pod: Mapping[str, Any], target: Any) -> int | None:
    """A Service's targetPort on ``pod``: a number, or the name of one of its container ports."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in as_list(as_dict(pod.get("spec")).get("containers")):
        for port in as_list(as_dict(container).get("ports")):
            if as_dict(port).get("name") == target and as_dict(port).get("containerPort"):
                return int(as_dict(port)["containerPort"])
    return None
