"""The package's public surface is small and pinned; importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import kubetrain

PUBLIC = {
    "BuiltinTrainer",
    "CustomTrainer",
    "CustomTrainerContainer",
    "Initializer",
    "KubernetesBackendConfig",
    "LocalBackendConfig",
    "TrainerClient",
    "__version__",
}


def test_top_level_names_are_exactly_the_sdk_surface() -> None:
    assert set(kubetrain.__all__) == PUBLIC
    for name in kubetrain.__all__:
        assert getattr(kubetrain, name) is not None


def test_importing_kubetrain_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, kubetrain; "
        "print(sorted(m for m in ('torch', 'kubernetes', 'lightkube', 'aiohttp', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
