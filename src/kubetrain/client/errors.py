"""One-line errors for people: what the server (or the connection) said, naming the object.

Every client operation turns API and transport failures into :class:`ClientError` so that the CLI
prints one line and exits 1, and SDK users catch one exception type instead of transport types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kubetrain.api.access import dicts, obj_at

__all__ = ["ClientError", "NotFoundError", "describe_status", "translate_errors"]


class ClientError(RuntimeError):
    """A failure worth one line to a person; ``reason`` is the Kubernetes Status reason if any."""

    def __init__(self, message: str, *, reason: str = "", code: int = 0) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code


class NotFoundError(ClientError):
    """The object (or its namespace) does not exist."""


def describe_status(status: dict[str, Any], what: str = "") -> str:
    """One line from a Kubernetes ``Status`` body: message plus field causes, in server order.

    The server's message already names the object for 404/409/422; ``what`` is only used when the
    body carries no message (a proxy's bare 502, say).
    """
    message = str(status.get("message") or "").strip()
    causes = dicts(obj_at(status, "details").get("causes"))
    # A 422 message from a real server repeats its causes; add them only when they are not there.
    extra = [
        f"{c.get('field')}: {c.get('message')}" if c.get("field") else str(c.get("message"))
        for c in causes
        if c.get("message") and str(c.get("message")) not in message
    ]
    if not message:
        reason = status.get("reason") or f"HTTP {status.get('code', '?')}"
        message = f"{what}: {reason}" if what else str(reason)
    if extra:
        message = f"{message}: {'; '.join(extra)}"
    return " ".join(message.split())


def _from_api_error(exc: Any, what: str) -> ClientError:
    """A :class:`ClientError` from ``kubetrain.kube.client.ApiError`` (its Status body)."""
    body: dict[str, Any] = dict(exc.status or {})
    body.setdefault("code", exc.code)
    body.setdefault("reason", exc.reason)
    if not body.get("message") and exc.message != exc.reason:
        body["message"] = exc.message
    cls = NotFoundError if exc.code == 404 else ClientError
    return cls(describe_status(body, what), reason=str(body.get("reason") or ""), code=exc.code)


@contextlib.contextmanager
def translate_errors(what: str = "", server: str = "") -> Iterator[None]:
    """Re-raise transport and API failures inside the block as :class:`ClientError`.

    ``what`` names the object for messages the server leaves empty; ``server`` is the URL for
    connection failures, which otherwise print as a bare socket error.
    """
    from kubetrain.kube.client import TRANSPORT_ERRORS, ApiError

    try:
        yield
    except ClientError:
        raise
    except ApiError as exc:
        raise _from_api_error(exc, what) from None
    except TRANSPORT_ERRORS as exc:
        where = f" at {server}" if server else ""
        detail = str(exc) or type(exc).__name__
        raise ClientError(f"cannot reach the Kubernetes API{where}: {detail}") from None
