"""The public surface of kubetrain.runtime and kubetrain.testing is pinned."""

from __future__ import annotations

import kubetrain.runtime
import kubetrain.testing


def test_runtime_all_is_pinned() -> None:
    assert sorted(kubetrain.runtime.__all__) == [
        "Environment",
        "Existing",
        "FeatureGateError",
        "FeatureGates",
        "JobState",
        "Plan",
        "RenderError",
        "StatusUpdate",
        "Validation",
        "derive",
        "derive_status",
        "job_state",
        "render",
        "validate_runtime",
        "validate_trainjob",
    ]
    for name in kubetrain.runtime.__all__:
        assert getattr(kubetrain.runtime, name) is not None


def test_render_is_the_function_even_after_importing_the_module() -> None:
    import sys

    from kubetrain.runtime.render import Plan  # the module stays importable by name

    module = sys.modules["kubetrain.runtime.render"]
    assert kubetrain.runtime.render is module.render and Plan is module.Plan


def test_testing_all_is_pinned() -> None:
    assert sorted(kubetrain.testing.__all__) == [
        "RuntimeBuilder",
        "TrainJobBuilder",
        "make_runtime",
        "make_trainjob",
    ]
