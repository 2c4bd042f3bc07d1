"""One-line errors for people: what the server (or the connection) said, naming the object.

Every client operation turns lightkube/httpx failures into :class:`ClientError` so that the CLI
prints one line and exits 1, and SDK users catch one exception type instead of transport types.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

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
    details = status.get("details") or {}
    causes = [c for c in details.get("causes") or [] if isinstance(c, dict)]
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


def _from_http_status(exc: Exception, what: str) -> ClientError:
    response = getattr(exc, "response", None)
    body: dict[str, Any] = {}
    status_obj = getattr(exc, "status", None)
    if status_obj is not None and hasattr(status_obj, "to_dict"):
        body = status_obj.to_dict()
    elif response is not None:
        # lightkube only decodes Status bodies served as exactly ``application/json``; decode the rest.
        with contextlib.suppress(Exception):
            response.read()
        with contextlib.suppress(ValueError, TypeError):
            loaded = json.loads(response.content or b"{}")
            if isinstance(loaded, dict):
                body = loaded
        if not body and response.content:
            body = {"message": response.content.decode(errors="replace")[:300]}
    code = int(body.get("code") or (response.status_code if response is not None else 0) or 0)
    body.setdefault("code", code)
    reason = str(body.get("reason") or "")
    message = describe_status(body, what)
    cls = NotFoundError if code == 404 else ClientError
    return cls(message, reason=reason, code=code)


@contextlib.contextmanager
def translate_errors(what: str = "", server: str = "") -> Iterator[None]:
    """Re-raise transport and API failures inside the block as :class:`ClientError`.

    ``what`` names the object for messages the server leaves empty; ``server`` is the URL for
    connection failures, which otherwise print as a bare socket error.
    """
    import httpx2

    try:
        yield
    except ClientError:
        raise
    except httpx2.HTTPStatusError as exc:
        raise _from_http_status(exc, what) from None
    except httpx2.TransportError as exc:
        where = f" at {server}" if server else ""
        detail = str(exc) or type(exc).__name__
        raise ClientError(f"cannot reach the Kubernetes API{where}: {detail}") from None
