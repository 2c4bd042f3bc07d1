"""The controller package's public names (the daemon and ``kubetrain controller`` use these)."""

from __future__ import annotations

import inspect

import kubetrain.controller as controller


def test_public_names_are_pinned() -> None:
    assert sorted(controller.__all__) == [
        "ApiError",
        "Controller",
        "KubeClient",
        "LeaderElector",
        "LeadershipLost",
        "connect",
        "run_controller",
    ]


def test_run_controller_keeps_its_keyword_only_options() -> None:
    params = inspect.signature(controller.run_controller).parameters
    assert list(params) == [
        "config",
        "context",
        "namespace",
        "gates",
        "environment",
        "concurrency",
        "stop_event",
        "ready",
        "lease_identity",
    ]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "config")
