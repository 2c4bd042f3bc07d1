"""kubetrain.migrate's surface is small and pinned; importing it loads nothing until used."""

from __future__ import annotations

import subprocess
import sys

import kubetrain.migrate


def test_the_public_names_are_pinned() -> None:
    assert set(kubetrain.migrate.__all__) == {
        "Category", "Conversion", "Finding", "MigrateError", "ReportItem", "Severity",
        "convert", "is_trainer_object", "is_v1_job", "upgrade_check", "upgrade_fix",
    }  # fmt: skip
    for name in kubetrain.migrate.__all__:
        assert getattr(kubetrain.migrate, name) is not None


def test_importing_the_package_loads_no_runtime_yet() -> None:
    code = "import sys, kubetrain.migrate; print('kubetrain.runtime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
