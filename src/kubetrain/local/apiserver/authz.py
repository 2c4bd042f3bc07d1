"""The API server's side of RBAC: the stored policy kept indexed, and the access-review endpoints.

`PolicyCache` rebuilds `rbac.Policy` only after a committed change to one of the four RBAC
kinds (a write answers only once committed, so a client that created a RoleBinding finds it in
force on its next request), and writes each decision to the audit log when there is one. `review_routes` serves SelfSubjectAccessReview,
SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview through
`rbac.access_review_answer` / `rbac.rules_review_answer`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kubetrain.local.apiserver import errors as E
from kubetrain.local.apiserver import protobuf, rbac
from kubetrain.local.apiserver.audit import AuditLog
from kubetrain.local.apiserver.store import Change, Store

__all__ = ["USER_KEY", "PolicyCache", "review_routes"]

# Where the middleware leaves the authenticated `rbac.User` on the request.
USER_KEY = web.RequestKey("kubetrain.user", rbac.User)
_KEYS = {
    f"{rbac.GROUP}/clusterroles": "cluster_roles",
    f"{rbac.GROUP}/roles": "roles",
    f"{rbac.GROUP}/clusterrolebindings": "cluster_role_bindings",
    f"{rbac.GROUP}/rolebindings": "role_bindings",
}
_AUTHZ = "/apis/authorization.k8s.io/v1"
_MAX_BODY = 256 * 1024


class PolicyCache:
    """The stored RBAC objects as one `rbac.Policy`, rebuilt after they change."""

    def __init__(self, store: Store, audit: AuditLog | None = None) -> None:
        self._store = store
        self._policy: rbac.Policy | None = None
        self.audit = audit
        store.subscribe(self._changed)

    def _changed(self, change: Change) -> None:
        if change.resource in _KEYS:
            self._policy = None

    def policy(self) -> rbac.Policy:
        if self._policy is None:
            tables = {field: self._store.items(key) for key, field in _KEYS.items()}
            self._policy = rbac.Policy.build(**tables)
        return self._policy

    def authorize(self, user: rbac.User, attributes: rbac.Attributes) -> rbac.Decision:
        decision = rbac.authorize(user, attributes, self.policy())
        if self.audit is not None:
            self.audit.record(user, attributes, decision)
        return decision


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def review_routes(cache: PolicyCache) -> list[tuple[str, str, Handler]]:
    """(method, path, handler) of the four access-review endpoints (create only, as upstream)."""

    async def answer(
        request: web.Request, build: Callable[[Any, rbac.User], dict[str, Any]]
    ) -> web.StreamResponse:
        raw = await request.content.read(_MAX_BODY + 1)
        if len(raw) > _MAX_BODY:
            return _status(E.ApiError(413, "RequestEntityTooLarge", "request body too large"))
        try:
            if "protobuf" in request.headers.get("Content-Type", ""):
                body = protobuf.decode(raw)  # kubectl auth can-i sends protobuf
            else:
                body = json.loads(raw or b"null")
        except (ValueError, protobuf.ProtobufError):
            return _status(E.bad_request("the body is neither JSON nor a known protobuf message"))
        user = request.get(USER_KEY) or rbac.ADMIN
        try:
            return web.json_response(build(body, user), status=201)
        except rbac.ReviewError as err:
            kind = str(body.get("kind") if isinstance(body, dict) else "") or "SubjectAccessReview"
            return _status(
                E.ApiError(422, "Invalid", f'{kind}.authorization.k8s.io "" is invalid: {err}')
            )

    def access(kind: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            namespace = request.match_info.get("namespace")
            return await answer(
                request,
                lambda body, user: rbac.access_review_answer(
                    kind, body, user, cache.policy(), namespace
                ),
            )

        return handle

    async def rules(request: web.Request) -> web.StreamResponse:
        return await answer(
            request, lambda body, user: rbac.rules_review_answer(body, user, cache.policy())
        )

    return [
        ("POST", f"{_AUTHZ}/selfsubjectaccessreviews", access("SelfSubjectAccessReview")),
        ("POST", f"{_AUTHZ}/subjectaccessreviews", access("SubjectAccessReview")),
        (
            "POST",
            f"{_AUTHZ}/namespaces/{{namespace}}/localsubjectaccessreviews",
            access("LocalSubjectAccessReview"),
        ),
        ("POST", f"{_AUTHZ}/selfsubjectrulesreviews", rules),
    ]


def _status(err: E.ApiError) -> web.Response:
    return web.json_response(err.status(), status=err.code)
