"""Service-account tokens for the local engine: TokenRequest and TokenReview, as kube-apiserver does them.

On a cluster the kubelet asks the API server (TokenRequest) for a token bound to the pod and to
an audience, projects it into the pod, and whoever receives it asks the API server whether it is
good (TokenReview). The local engine keeps that one mechanism: the executor fills projected
``serviceAccountToken`` volumes through TokenRequest on the embedded API server, and the status
server checks tokens with TokenReview there. Nothing in the status server knows which engine it
serves.

Tokens are JWTs signed with HS256 under a random key kept in ``<KUBETRAIN_HOME>/serviceaccount.key``
(mode 0600). A symmetric key is enough here: the API server that mints a token is the only party
that ever verifies it. The claims follow kube-apiserver's bound tokens (``iss``, ``sub``, ``aud``,
``exp``, ``iat``, ``nbf``, ``jti``, and ``kubernetes.io`` with namespace, service account and the
bound pod), so a token decoded by hand reads like one from a cluster.

The pure functions (`mint`, `verify`, `token_request_answer`, `token_review_answer`) take the
time and a lookup of stored objects as arguments; `TokenAuthority` adds the key file, the clock
and the aiohttp handlers the embedded API server mounts (`TokenAuthority.routes`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from kubetrain.api.access import as_list, obj_at
from kubetrain.api.meta import failure_status

if TYPE_CHECKING:  # the API server imports this module; only the kubelet's side needs a client
    from kubetrain.kube.client import KubeClient

__all__ = [
    "DEFAULT_EXPIRATION_S",
    "ISSUER",
    "KEY_FILE",
    "MIN_EXPIRATION_S",
    "TOKEN_REQUEST_PATH",
    "TOKEN_REVIEW_PATH",
    "BoundPod",
    "Claims",
    "ObjectLookup",
    "Refusal",
    "TokenAuthority",
    "TokenError",
    "load_or_create_key",
    "mint",
    "request_token",
    "token_request_answer",
    "token_review_answer",
    "verify",
]

# kube-apiserver's default --service-account-issuer; also the audience of tokens asked for
# without one (they are then good only for the API server itself).
ISSUER = "https://kubernetes.default.svc.cluster.local"
KEY_FILE = "serviceaccount.key"
DEFAULT_EXPIRATION_S = 3600
# kube-apiserver refuses shorter requests ("may not specify a duration less than 10 minutes").
MIN_EXPIRATION_S = 600
MAX_EXPIRATION_S = 2**32
TOKEN_REQUEST_PATH = "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
TOKEN_REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"

# The local engine has no service-account controller creating ``default`` in every namespace;
# pods name it anyway (it is the default serviceAccountName), so it counts as present.
_IMPLICIT_SERVICE_ACCOUNT = "default"
_SUCCESS_TTL_S = 10.0
_AUTHENTICATED_CACHED = 4096
_MAX_BODY = 64 * 1024


class TokenError(Exception):
    """Why a token is not accepted; the text goes into ``TokenReview.status.error``."""


@dataclass(frozen=True)
class BoundPod:
    """The pod a token is bound to: it dies with the pod (same name, other uid = other pod)."""

    name: str
    uid: str


@dataclass(frozen=True)
class Claims:
    """What a verified token says about its holder."""

    namespace: str
    service_account: str
    audiences: tuple[str, ...]
    expires: int
    service_account_uid: str = ""
    pod: BoundPod | None = None
    token_id: str = ""

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


class ObjectLookup(Protocol):
    """Read access to stored objects (the API server's admission reader satisfies it)."""

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None: ...


# -- JWT (HS256) ------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, signing_input: str) -> str:
    return _b64(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())


def load_or_create_key(home: Path) -> bytes:
    """The signing key of ``home``, created (32 random bytes, mode 0600) on first use.

    Kept across daemon restarts so tokens already projected into running pods stay valid.
    """
    path = home / KEY_FILE
    try:
        key = path.read_bytes().strip()
        if key:
            return binascii.unhexlify(key)
    except (OSError, ValueError):
        pass
    home.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(binascii.hexlify(key) + b"\n")
    os.replace(scratch, path)
    return key


def mint(
    key: bytes,
    *,
    namespace: str,
    service_account: str,
    audiences: Sequence[str],
    now: int,
    expiration_s: int = DEFAULT_EXPIRATION_S,
    service_account_uid: str = "",
    pod: BoundPod | None = None,
    issuer: str = ISSUER,
) -> str:
    """A signed token for ``system:serviceaccount:<namespace>:<service_account>``."""
    k8s: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": service_account}}
    if service_account_uid:
        k8s["serviceaccount"]["uid"] = service_account_uid
    if pod is not None:
        k8s["pod"] = {"name": pod.name, "uid": pod.uid}
    claims = {
        "iss": issuer,
        "sub": f"system:serviceaccount:{namespace}:{service_account}",
        "aud": list(audiences),
        "exp": now + expiration_s,
        "iat": now,
        "nbf": now,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": k8s,
    }
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}"
    return f"{signing_input}.{_sign(key, signing_input)}"


def verify(key: bytes, token: str, *, now: int, issuer: str = ISSUER) -> Claims:
    """The claims of a well-signed, current token from ``issuer``; raises `TokenError` otherwise.

    Audiences and bound objects are checked by the caller (`token_review_answer`), which knows
    what the reviewer asked for and what is stored.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("token is not a JWT")
    header_b64, payload_b64, signature = parts
    # Compare in constant time: the signature is the only secret-dependent part.
    if not hmac.compare_digest(_sign(key, f"{header_b64}.{payload_b64}"), signature):
        raise TokenError("invalid signature")
    try:
        header = json.loads(_unb64(header_b64))
        claims = json.loads(_unb64(payload_b64))
    except (ValueError, binascii.Error) as err:
        raise TokenError("malformed token") from err
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise TokenError("unexpected signing algorithm")
    if not isinstance(claims, dict):
        raise TokenError("malformed token")
    if claims.get("iss") != issuer:
        raise TokenError("token issued by someone else")
    try:
        exp, nbf = int(claims["exp"]), int(claims.get("nbf", 0))
        k8s = claims["kubernetes.io"]
        namespace = str(k8s["namespace"])
        sa = k8s["serviceaccount"]
        aud = claims["aud"]
        audiences = (aud,) if isinstance(aud, str) else tuple(str(a) for a in aud)
        pod = k8s.get("pod")
        bound = BoundPod(str(pod["name"]), str(pod["uid"])) if isinstance(pod, dict) else None
    except (KeyError, TypeError, ValueError) as err:
        raise TokenError("token lacks required claims") from err
    if now >= exp:
        raise TokenError("token has expired")
    if now < nbf:
        raise TokenError("token is not valid yet")
    return Claims(
        namespace=namespace,
        service_account=str(sa["name"]),
        audiences=audiences,
        expires=exp,
        service_account_uid=str(sa.get("uid") or ""),
        pod=bound,
        token_id=str(claims.get("jti") or ""),
    )


# -- TokenRequest / TokenReview as data ---------------------------------------------------------


class Refusal(Exception):
    """A request the API server answers with a ``Status`` error."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return failure_status(self.code, self.reason, self.message)


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _service_account_uid(lookup: ObjectLookup, namespace: str, name: str) -> str | None:
    """The service account's uid ("" for the implicit ``default``), None when it does not exist."""
    sa = lookup.get("v1", "ServiceAccount", namespace, name)
    if sa is not None:
        return str(obj_at(sa, "metadata").get("uid") or "")
    return "" if name == _IMPLICIT_SERVICE_ACCOUNT else None


def token_request_answer(
    key: bytes,
    lookup: ObjectLookup,
    *,
    namespace: str,
    service_account: str,
    body: Any,
    now: int,
) -> dict[str, Any]:
    """The answer to ``POST .../serviceaccounts/<sa>/token``: the request with spec defaults and status.

    Raises `Refusal` for what kube-apiserver refuses: an unknown service account (404), a
    too short expiry (422), a bound object that is missing (404) or was recreated (409), or a
    bound pod that runs as another service account (422).
    """
    if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest":
        raise Refusal(
            400, "BadRequest", "the body must be an authentication.k8s.io/v1 TokenRequest"
        )
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise Refusal(400, "BadRequest", "spec must be an object")
    sa_uid = _service_account_uid(lookup, namespace, service_account)
    if sa_uid is None:
        raise Refusal(404, "NotFound", f'serviceaccounts "{service_account}" not found')
    given = spec.get("audiences")
    if given is not None and not isinstance(given, list):
        raise Refusal(400, "BadRequest", "spec.audiences must be a list of strings")
    audiences = [str(a) for a in as_list(given)] or [ISSUER]
    try:
        expiration = int(spec.get("expirationSeconds") or DEFAULT_EXPIRATION_S)
    except (TypeError, ValueError):
        raise Refusal(400, "BadRequest", "spec.expirationSeconds must be an integer") from None
    if expiration < MIN_EXPIRATION_S:
        raise Refusal(
            422,
            "Invalid",
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
        )
    if expiration > MAX_EXPIRATION_S:
        raise Refusal(
            422,
            "Invalid",
            "spec.expirationSeconds: Invalid value: may not specify a duration larger than 2^32 seconds",
        )
    pod: BoundPod | None = None
    ref = spec.get("boundObjectRef")
    if ref:
        if not isinstance(ref, dict) or ref.get("kind") != "Pod":
            # Secrets and Nodes can be bound on a cluster; the local engine only has pods to bind.
            raise Refusal(422, "Invalid", "spec.boundObjectRef.kind: Unsupported value: only Pod")
        name = str(ref.get("name") or "")
        stored = lookup.get("v1", "Pod", namespace, name)
        if stored is None:
            raise Refusal(404, "NotFound", f'pods "{name}" not found')
        meta = obj_at(stored, "metadata")
        uid = str(meta.get("uid") or "")
        if ref.get("uid") and ref["uid"] != uid:
            raise Refusal(
                409,
                "Conflict",
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                f"record. The object might have been deleted and then recreated",
            )
        pod_sa = str(obj_at(stored, "spec").get("serviceAccountName") or _IMPLICIT_SERVICE_ACCOUNT)
        if pod_sa != service_account:
            raise Refusal(
                422,
                "Invalid",
                f'pod "{name}" runs as service account "{pod_sa}", not "{service_account}"',
            )
        pod = BoundPod(name, uid)
    token = mint(
        key,
        namespace=namespace,
        service_account=service_account,
        audiences=audiences,
        now=now,
        expiration_s=expiration,
        service_account_uid=sa_uid,
        pod=pod,
    )
    answer_spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": expiration}
    if ref:
        answer_spec["boundObjectRef"] = {
            **ref,
            "apiVersion": ref.get("apiVersion", "v1"),
            "uid": pod.uid if pod else "",
        }
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": service_account, "namespace": namespace, "creationTimestamp": None},
        "spec": answer_spec,
        "status": {"token": token, "expirationTimestamp": _rfc3339(now + expiration)},
    }


def _bound_objects_error(claims: Claims, lookup: ObjectLookup, now: int) -> str | None:
    # kube-apiserver invalidates a bound token as soon as its pod (or service account) is gone
    # or replaced by a namesake: a token outlives neither.
    if claims.service_account_uid:
        uid = _service_account_uid(lookup, claims.namespace, claims.service_account)
        if uid != claims.service_account_uid:
            return "service account has been deleted or recreated"
    elif _service_account_uid(lookup, claims.namespace, claims.service_account) is None:
        return "service account does not exist"
    if claims.pod is not None:
        stored = lookup.get("v1", "Pod", claims.namespace, claims.pod.name)
        meta = obj_at(stored, "metadata")
        if stored is None or meta.get("uid") != claims.pod.uid:
            return f'pod "{claims.pod.name}" the token was bound to has been deleted'
        deleted = meta.get("deletionTimestamp")
        if deleted and _parse_time(str(deleted)) <= now:
            return f'pod "{claims.pod.name}" the token was bound to is being deleted'
    return None


def _parse_time(text: str) -> int:
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def token_review_answer(key: bytes, lookup: ObjectLookup, *, body: Any, now: int) -> dict[str, Any]:
    """The answer to ``POST /apis/authentication.k8s.io/v1/tokenreviews``.

    An unacceptable token is not an error of the request: the review succeeds with
    ``authenticated: false`` and the reason in ``status.error``, as kube-apiserver answers.
    With ``spec.audiences`` the token must carry at least one of them and ``status.audiences``
    lists those; without, it must be meant for the API server itself.
    """
    if not isinstance(body, dict) or body.get("kind", "TokenReview") != "TokenReview":
        raise Refusal(400, "BadRequest", "the body must be an authentication.k8s.io/v1 TokenReview")
    spec = obj_at(body, "spec")
    token = str(spec.get("token") or "")
    wanted = [str(a) for a in as_list(spec.get("audiences"))]
    answer: dict[str, Any] = {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"token": token, **({"audiences": wanted} if wanted else {})},
    }
    try:
        claims = verify(key, token, now=now)
        accepted = [a for a in (wanted or [ISSUER]) if a in claims.audiences]
        if not accepted:
            raise TokenError("token audiences do not match")
        problem = _bound_objects_error(claims, lookup, now)
        if problem is not None:
            raise TokenError(problem)
    except TokenError as err:
        answer["status"] = {
            "authenticated": False,
            "user": {},
            "error": f"[invalid bearer token, {err}]",
        }
        return answer
    extra: dict[str, list[str]] = {}
    if claims.pod is not None:
        extra["authentication.kubernetes.io/pod-name"] = [claims.pod.name]
        extra["authentication.kubernetes.io/pod-uid"] = [claims.pod.uid]
    if claims.token_id:
        extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims.token_id}"]
    user: dict[str, Any] = {
        "username": claims.username,
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{claims.namespace}",
            "system:authenticated",
        ],
        "extra": extra,
    }
    if claims.service_account_uid:
        user["uid"] = claims.service_account_uid
    answer["status"] = {"authenticated": True, "user": user, "audiences": accepted}
    return answer


# -- the API server's side: key, clock, handlers ---------------------------------------------


@dataclass
class TokenAuthority:
    """Mints and reviews tokens for one API server.

    Built before the server (whose ``routes`` take `routes`), then given the server's object
    reader with `attach`; until then both endpoints answer 503::

        authority = TokenAuthority.for_home(home)
        server = ApiServer(home, routes=authority.routes(), ...)
        authority.attach(server.reader)
    """

    key: bytes
    lookup: ObjectLookup | None = None
    clock: Callable[[], float] = time.time
    # Decodes a protobuf body (the API server's decoder, given by whoever builds the server).
    protobuf: Callable[[bytes], Any] | None = None
    minted: int = field(default=0, init=False)
    reviewed: int = field(default=0, init=False)
    _authenticated: dict[str, tuple[dict[str, Any], float]] = field(
        default_factory=dict, init=False
    )

    @classmethod
    def for_home(
        cls,
        home: Path,
        lookup: ObjectLookup | None = None,
        protobuf: Callable[[bytes], Any] | None = None,
    ) -> TokenAuthority:
        return cls(load_or_create_key(home), lookup, protobuf=protobuf)

    def attach(self, lookup: ObjectLookup) -> None:
        """Read service accounts and pods from ``lookup`` (the API server's reader)."""
        self.lookup = lookup

    def routes(
        self,
    ) -> list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]]:
        """(method, path, handler) for ``app.router.add_route``."""
        return [
            ("POST", TOKEN_REQUEST_PATH, self.handle_token_request),
            ("POST", TOKEN_REVIEW_PATH, self.handle_token_review),
        ]

    def _lookup(self) -> ObjectLookup:
        if self.lookup is None:
            raise Refusal(503, "ServiceUnavailable", "the token authority is not attached yet")
        return self.lookup

    def authenticate(self, token: str) -> dict[str, Any] | None:
        """The user (a TokenReview's ``status.user``) of a token meant for the API server itself.

        What the API server's service-account authenticator does for each request; None for a
        token that is not one of ours, has expired, or whose pod or service account is gone.
        """
        if self.lookup is None or token.count(".") != 2:
            return None
        now = self.clock()
        cached = self._authenticated.get(token)
        if cached is not None and cached[1] > now:
            return cached[0]
        answer = token_review_answer(
            self.key, self.lookup, body={"spec": {"token": token}}, now=int(now)
        )
        status = obj_at(answer, "status")
        user = status.get("user") if status.get("authenticated") else None
        if not isinstance(user, dict):
            return None
        # kube-apiserver keeps a token's success for 10 s (TokenSuccessCacheTTL) and its
        # failures not at all: a deleted pod's token stops working within that time.
        if len(self._authenticated) >= _AUTHENTICATED_CACHED:
            self._authenticated.clear()
        self._authenticated[token] = (user, now + _SUCCESS_TTL_S)
        return user

    async def handle_token_request(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        return await self._answer(
            request,
            lambda body: token_request_answer(
                self.key,
                self._lookup(),
                namespace=info["namespace"],
                service_account=info["name"],
                body=body,
                now=int(self.clock()),
            ),
        )

    async def handle_token_review(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(
            request,
            lambda body: token_review_answer(
                self.key, self._lookup(), body=body, now=int(self.clock())
            ),
        )

    async def _answer(
        self, request: web.Request, answer: Callable[[Any], dict[str, Any]]
    ) -> web.StreamResponse:
        try:
            raw = await request.content.read(_MAX_BODY + 1)
            if len(raw) > _MAX_BODY:
                raise Refusal(413, "RequestEntityTooLarge", "request body too large")
            try:
                if self.protobuf is not None and "protobuf" in request.headers.get(
                    "Content-Type", ""
                ):
                    body = self.protobuf(raw)  # kubectl create token sends protobuf
                else:
                    body = json.loads(raw or b"{}")
            except ValueError:
                raise Refusal(400, "BadRequest", "the body is not JSON") from None
            result = answer(body)
        except Refusal as refusal:
            return web.json_response(refusal.status(), status=refusal.code)
        if result.get("kind") == "TokenRequest":
            self.minted += 1
        else:
            self.reviewed += 1
        # Both are "create" verbs on kube-apiserver: 201 Created.
        return web.json_response(result, status=201)


# -- the kubelet's side -------------------------------------------------------------------------


async def request_token(
    api: KubeClient,
    pod: Mapping[str, Any],
    audience: str,
    *,
    expiration_s: int = DEFAULT_EXPIRATION_S,
) -> str:
    """Ask the API server (TokenRequest) for a token bound to ``pod`` for ``audience``.

    The plural carries the service account and the ``token`` subresource: the client's URL
    builder joins it as is, and TokenRequest is a create on that subresource.
    """
    meta = obj_at(pod, "metadata")
    namespace = str(meta.get("namespace") or "default")
    sa = str(obj_at(pod, "spec").get("serviceAccountName") or _IMPLICIT_SERVICE_ACCOUNT)
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"namespace": namespace},
        "spec": {
            # No audience: the API server's own (kube-api-access tokens).
            "audiences": [audience] if audience else [],
            "expirationSeconds": expiration_s,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": str(meta.get("name")),
                "uid": str(meta.get("uid")),
            },
        },
    }
    answer = await api.create("v1", f"serviceaccounts/{sa}/token", body)
    return str(obj_at(answer, "status").get("token") or "")
