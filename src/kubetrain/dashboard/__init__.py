"""kubetrain.dashboard: a read-mostly web UI over the Kubernetes API (``kubetrain dashboard``).

An aiohttp server (the engine's own HTTP stack) serves static assets from this package and a
small JSON/Server-Sent-Events API. It holds no rules of its own: states, progress, ETA, the key
metric, steps and metric series come from :mod:`kubetrain.client`, exactly as the CLI shows them.
"""

from __future__ import annotations

__all__ = ["DashboardConfig", "serve"]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kubetrain.dashboard.app import DashboardConfig, serve


def __getattr__(name: str) -> Any:
    # aiohttp loads only when the dashboard is used.
    if name in __all__:
        from kubetrain.dashboard import app

        return getattr(app, name)
    raise AttributeError(f"module 'kubetrain.dashboard' has no attribute {name!r}")
