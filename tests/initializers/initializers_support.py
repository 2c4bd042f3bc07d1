"""Helpers the initializer tests share."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["EXAMPLE", "example_setup"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "initializers"


def example_setup() -> ModuleType:
    """examples/initializers/setup.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("initializers_setup", EXAMPLE / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
