"""The one error the sandbox raises, carrying the kubelet reason a cluster would show."""

from __future__ import annotations

__all__ = ["SandboxError"]


class SandboxError(Exception):
    """A container could not be set up or started.

    ``reason`` is what a kubelet would put in ``state.waiting.reason``
    (``CreateContainerConfigError`` for a missing ConfigMap key, ``RunContainerError`` for a
    command that cannot start), so the executor can copy it into the Pod status unchanged.
    """

    def __init__(self, message: str, *, reason: str = "CreateContainerConfigError") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
