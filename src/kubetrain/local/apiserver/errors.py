"""Kubernetes ``Status`` errors: every failure leaves the server as one of these.

Clients branch on ``code`` and ``reason`` (lightkube maps an error only when the content type is
exactly ``application/json``, so the HTTP layer sets that header for every Status it writes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubetrain.api.errors import ERROR_TYPE_TEXT, FieldError, aggregate_text, field_error_text
from kubetrain.api.meta import failure_status

__all__ = [
    "ApiError",
    "aggregate_text",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "field_error_text",
    "forbidden",
    "invalid",
    "method_not_allowed",
    "not_found",
    "status_success",
    "unauthorized",
    "unsupported_media_type",
]


class ApiError(Exception):
    """An error answer: HTTP ``code``, Kubernetes ``reason`` and a human ``message``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The ``Status`` object for the response body."""
        return failure_status(self.code, self.reason, self.message, self.details)


def status_success(details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``Status`` a successful delete answers with when no object is returned."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    if details:
        body["details"] = details
    return body


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    """404 for a missing object: ``trainjobs.trainer.kubeflow.org "x" not found``."""
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(group, plural)} "{name}" not found',
        _details(group, plural, name),
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    """409 for a create whose name is taken."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    """409 Conflict: a stale resourceVersion, a failed precondition or an apply conflict."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}',
        _details(group, plural, name),
    )


def invalid(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """422 Invalid with one cause per field error; the message names every field."""
    qualified = f"{kind}.{group}" if group else kind
    causes = [
        {
            "reason": ERROR_TYPE_TEXT.get(e.type, ("", "FieldValueInvalid"))[1],
            "message": field_error_text(e),
            "field": e.path,
        }
        for e in errors
    ]
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    return ApiError(
        422, "Invalid", f'{qualified} "{name}" is invalid: {aggregate_text(errors)}', details
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest: a body or parameter the server cannot use."""
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, details: dict[str, Any] | None = None) -> ApiError:
    """403 Forbidden: admission denials and operations Kubernetes refuses outright."""
    return ApiError(403, "Forbidden", message, details)


def unauthorized() -> ApiError:
    """401 for a request without a valid bearer token."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    """405 for a verb the resource does not support."""
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    """415, e.g. strategic merge patch on a custom resource."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got "{content_type}")',
    )


def expired(requested: int, oldest: int) -> ApiError:
    """410 Gone/Expired: a watch or continue token older than the history the server keeps."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")
