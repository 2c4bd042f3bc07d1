"""The admission webhook server: AdmissionReview v1 over HTTPS, for a real kube-apiserver.

In a cluster the kube-apiserver calls these endpoints (trainer v2.3.0 pkg/webhooks/) before it stores a
TrainJob, TrainingRuntime or ClusterTrainingRuntime. Every decision is made by the same
functions the embedded API server calls in-process: ``kubetrain.runtime.validate_trainjob`` /
``validate_runtime`` for the validating webhooks, and the TrainJob mutating rule (runtimePatches
time stamps) for the defaulter; ``AdmissionRules.default()`` names that rule and the text of a
denial (``kubetrain.api.errors.aggregate_text``), the same ones the embedded API server uses.

Answer shape (controller-runtime's, which upstream uses): a denial is ``allowed: false`` with
``status {code: 403, reason: Forbidden, message: <field errors>}``; the kube-apiserver then
reports ``admission webhook "<name>" denied the request: <message>`` to the client
(``kubetrain.local.apiserver.webhooks.denial``, the embedded API server's same step). Warnings
travel in ``response.warnings``.
The mutating webhook answers with a base64 JSONPatch (``patchType: JSONPatch``).
"""

from __future__ import annotations

import base64
import logging
import ssl
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from kubetrain.api import codec
from kubetrain.api.access import obj_at
from kubetrain.api.errors import FieldError, aggregate_text
from kubetrain.api.types import Obj
from kubetrain.controller.trainjob import Caches, read_through
from kubetrain.kube import http1
from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient
from kubetrain.kube.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    JOBSET,
    TRAINING_RUNTIME,
    TRAINJOB,
    Kind,
)
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.validate import default_trainjob

__all__ = [
    "ADMISSION_API_VERSION",
    "MUTATING_CONFIGURATION",
    "VALIDATING_CONFIGURATION",
    "WEBHOOKS",
    "AdmissionHandler",
    "AdmissionRules",
    "Operation",
    "Webhook",
    "WebhookServer",
    "admission_review",
    "json_patch",
]

log = logging.getLogger(__name__)

ADMISSION_API_VERSION = "admission.k8s.io/v1"
VALIDATING_CONFIGURATION = "validator.trainer.kubeflow.org"
MUTATING_CONFIGURATION = "defaulter.trainer.kubeflow.org"
# The check that only the Volcano plugin makes needs the cluster's PriorityClass names.
_PRIORITY_CLASSES = ("scheduling.k8s.io/v1", "priorityclasses")

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of upstream's two configurations (trainer v2.3.0 pkg/webhooks/)."""

    name: str
    path: str
    kind: Kind
    mutating: bool = False

    @property
    def runtime(self) -> bool:
        """The runtime webhooks carry the ``webhook-validation`` objectSelector (v2.3)."""
        return self.kind is not TRAINJOB


def _validator(kind: Kind) -> Webhook:
    lower = kind.kind.lower()
    return Webhook(
        f"validator.{lower}.trainer.kubeflow.org",
        f"/validate-trainer-kubeflow-org-v1alpha1-{lower}",
        kind,
    )


WEBHOOKS: tuple[Webhook, ...] = (
    _validator(CLUSTER_TRAINING_RUNTIME),
    _validator(TRAINING_RUNTIME),
    _validator(TRAINJOB),
    Webhook(
        "defaulter.trainjob.trainer.kubeflow.org",
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        TRAINJOB,
        mutating=True,
    ),
)
_BY_PATH = {w.path: w for w in WEBHOOKS}


@dataclass(frozen=True, slots=True)
class AdmissionRules:
    """The two admission pieces shared with the embedded API server.

    ``mutate_trainjob(operation, trainjob, old)`` returns the TrainJob to store (it may change its
    argument); ``error_text(errors)`` is the text of a denial (Go's ``ErrorList.ToAggregate()``).
    ``AdmissionRules.default()`` takes both from where they live once: ``kubetrain.runtime``'s
    ``default_trainjob`` and ``kubetrain.api.errors.aggregate_text``.
    """

    mutate_trainjob: Callable[[str, Obj, Obj | None], Obj]
    error_text: Callable[[Sequence[FieldError]], str]

    @classmethod
    def default(cls) -> AdmissionRules:
        def mutate(operation: str, obj: Obj, old: Obj | None) -> Obj:
            return default_trainjob(
                obj, old=old if operation == "UPDATE" else None, now=datetime.now(UTC)
            )

        return cls(mutate_trainjob=mutate, error_text=aggregate_text)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def json_patch(before: Any, after: Any, path: str = "") -> list[Obj]:
    """An RFC 6902 patch turning ``before`` into ``after``: per key for objects, per item for
    lists of equal length, whole values otherwise (small patches for small mutations)."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[Obj] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in after.items():
            sub = f"{path}/{_escape(key)}"
            if key not in before:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                ops += json_patch(before[key], value, sub)
        return ops
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        ops = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            ops += json_patch(b, a, f"{path}/{i}")
        return ops
    return [{"op": "replace", "path": path or "", "value": after}]


def admission_review(
    obj: Obj | None,
    *,
    operation: Operation = "CREATE",
    old: Obj | None = None,
    uid: str = "00000000-0000-0000-0000-000000000001",
    user: str = "kubernetes-admin",
) -> Obj:
    """An AdmissionReview v1 request as a kube-apiserver sends it for ``obj`` (tests, tools)."""
    ref = obj if obj is not None else (old or {})
    api_version = str(ref.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    kind = str(ref.get("kind") or "")
    meta = obj_at(ref, "metadata")
    plural = kind.lower() + "s"
    request: Obj = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": plural},
        "name": meta.get("name", ""),
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if meta.get("namespace"):
        request["namespace"] = meta["namespace"]
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "request": request}


class _Errored(Exception):
    """A request the webhook cannot decide (bad input, API server unreachable)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _answer(
    uid: str,
    *,
    allowed: bool,
    code: int = 200,
    reason: str = "",
    message: str = "",
    warnings: Sequence[str] = (),
    patch: list[Obj] | None = None,
) -> Obj:
    status: Obj = {"metadata": {}, "code": code}
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    response: Obj = {"uid": uid, "allowed": allowed, "status": status}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(codec.dumps(patch)).decode()
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


class AdmissionHandler:
    """Decides AdmissionReviews; reads the live objects a rule needs.

    A TrainJob's runtime (and on UPDATE its JobSet) comes from ``caches``, the informers the
    reconciler reads, as upstream's webhook reads them from the manager's cache: admission then
    costs the API server no request. An object the cache does not hold (not synced yet, a
    namespace the controller does not watch, a runtime created a moment ago) is read from the
    API server, so a missing runtime is only ever reported after the server confirmed it.
    Without ``caches`` every such read goes to the API server.
    """

    def __init__(
        self,
        client: KubeClient,
        rules: AdmissionRules,
        *,
        gates: FeatureGates | None = None,
        environment: Environment | None = None,
        caches: Caches | None = None,
    ) -> None:
        self._client = client
        self._caches = caches
        self._rules = rules
        self._gates = gates
        self._environment = environment
        self.counts: dict[tuple[str, bool], int] = defaultdict(int)
        """(webhook name, allowed) → answers given; for ``/metrics``."""

    async def review(self, path: str, review: Any) -> Obj:
        """The AdmissionReview answer for a request body sent to ``path``."""
        answer = await self._review(path, review)
        webhook = _BY_PATH.get(path)
        if webhook is not None:
            self.counts[(webhook.name, bool(answer["response"]["allowed"]))] += 1
        return answer

    async def _review(self, path: str, review: Any) -> Obj:
        request = review.get("request") if isinstance(review, dict) else None
        if not isinstance(request, dict):
            return _answer("", allowed=False, code=400, message="AdmissionReview has no request")
        uid = str(request.get("uid") or "")
        webhook = _BY_PATH.get(path)
        if webhook is None:
            return _answer(uid, allowed=False, code=404, message=f"no webhook at {path}")
        operation = str(request.get("operation") or "")
        obj, old = request.get("object"), request.get("oldObject")
        if operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
            return _answer(uid, allowed=True)  # the configurations only send CREATE and UPDATE
        if obj.get("kind") != webhook.kind.kind:
            return _answer(
                uid,
                allowed=False,
                code=400,
                message=f"expected a {webhook.kind.kind} but got a {obj.get('kind')}",
            )
        old = old if isinstance(old, dict) and operation == "UPDATE" else None
        try:
            if webhook.mutating:
                mutated = self._rules.mutate_trainjob(operation, codec.clone(obj), old)
                return _answer(uid, allowed=True, patch=json_patch(obj, mutated))
            errors, warnings = await self._validate(webhook, operation, obj, old)
        except _Errored as err:
            return _answer(uid, allowed=False, code=err.code, message=err.message)
        if errors:
            return _answer(
                uid,
                allowed=False,
                code=403,
                reason="Forbidden",
                message=self._rules.error_text(errors),
                warnings=warnings,
            )
        return _answer(uid, allowed=True, warnings=warnings)

    async def _validate(
        self, webhook: Webhook, operation: str, obj: Obj, old: Obj | None
    ) -> tuple[list[FieldError], list[str]]:
        from kubetrain.runtime.validate import (
            runtime_webhook_enabled,
            validate_runtime,
            validate_trainjob,
        )

        if webhook.runtime:
            verdict = validate_runtime(
                obj,
                old=old,
                operation="UPDATE" if operation == "UPDATE" else "CREATE",
                webhook=runtime_webhook_enabled(obj),
            )
            return verdict.errors, verdict.warnings
        namespace = str(obj_at(obj, "metadata").get("namespace") or "")
        runtime = await self._runtime(obj, namespace)
        jobset = None
        if old is not None:
            jobset = await self._get(
                JOBSET, str(obj_at(obj, "metadata").get("name") or ""), namespace
            )
        priority_classes = await self._priority_classes(runtime)
        verdict = validate_trainjob(
            obj,
            runtime,
            old=old,
            jobset=jobset,
            priority_classes=priority_classes,
            gates=self._gates,
            environment=self._environment,
        )
        return verdict.errors, verdict.warnings

    async def _runtime(self, trainjob: Obj, namespace: str) -> Obj | None:
        from kubetrain.runtime.core import TRAINER_GROUP, runtime_ref

        group, kind, name = runtime_ref(trainjob)
        if group != TRAINER_GROUP or not name:
            return None  # validate_trainjob reports the unsupported runtime itself
        if kind == TRAINING_RUNTIME.kind:
            return await self._get(TRAINING_RUNTIME, name, namespace)
        if kind == CLUSTER_TRAINING_RUNTIME.kind:
            return await self._get(CLUSTER_TRAINING_RUNTIME, name, None)
        return None

    async def _get(self, kind: Kind, name: str, namespace: str | None) -> Obj | None:
        try:
            return await read_through(self._client, self._caches, kind, name, namespace)
        except ApiError as err:
            raise _Errored(500, f"reading {kind.kind} {name}: {err.message}") from err
        except TRANSPORT_ERRORS as err:
            raise _Errored(500, f"reading {kind.kind} {name}: {err}") from err

    async def _priority_classes(self, runtime: Obj | None) -> list[str] | None:
        # Only a Volcano runtime's check reads them; None tells the plugin to skip it.
        policy = obj_at(runtime, "spec", "podGroupPolicy")
        if "volcano" not in policy:
            return None
        try:
            items, _ = await self._client.list(*_PRIORITY_CLASSES)
        except ApiError as err:
            raise _Errored(500, f"listing PriorityClasses: {err.message}") from err
        except TRANSPORT_ERRORS as err:
            raise _Errored(500, f"listing PriorityClasses: {err}") from err
        return [str(obj_at(pc, "metadata").get("name") or "") for pc in items]


class WebhookServer:
    """An HTTPS server with one route per webhook in ``WEBHOOKS`` (``kube.http1.Server``: an
    admission review through aiohttp's server cost more CPU in the framework than in the
    review)."""

    def __init__(self, handler: AdmissionHandler) -> None:
        self.handler = handler
        self._server = http1.Server(self._serve, max_body=8 * 1024 * 1024)
        self.started = False

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Serve on ``host:port`` (0 picks a free port); returns the port."""
        bound = await self._server.start(host, port, ssl_context)
        self.started = True
        return bound

    async def stop(self, grace: float = 0.0) -> None:
        """Stop serving; reviews already received are answered for up to ``grace`` seconds."""
        self.started = False
        await self._server.stop(grace)

    async def _serve(self, request: http1.Request) -> http1.Response:
        if request.path not in _BY_PATH:
            return http1.Response(404, b"404: Not Found", "text/plain")
        if request.method != "POST":
            return http1.Response(405, b"405: Method Not Allowed", "text/plain")
        if request.content_type != "application/json":
            message = "Content-Type must be application/json"
            return _json(415, _answer("", allowed=False, code=415, message=message))
        try:
            review = codec.loads(request.body)
        except codec.DecodeError as err:
            message = f"undecodable AdmissionReview: {err}"
            return _json(400, _answer("", allowed=False, code=400, message=message))
        answer = await self.handler.review(request.path, review)
        response = answer["response"]
        if not response["allowed"]:
            log.info(
                "denied %s %s: %s",
                request.path,
                response["uid"],
                response["status"].get("message"),
            )
        return _json(200, answer)


def _json(status: int, answer: Obj) -> http1.Response:
    return http1.Response(status, codec.dumps(answer))
