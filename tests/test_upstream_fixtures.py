"""The upstream files the tests compare against are exactly what tools/fetch_upstream.py pins."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from upstream_data import REPO, require


def _fetch_upstream() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fetch_upstream", REPO / "tools" / "fetch_upstream.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fetch_upstream", module)
    spec.loader.exec_module(module)
    return module


def test_the_pinned_digests_match_the_upstream_files_in_use() -> None:
    root = require("upstream-crds").parent
    assert _fetch_upstream().verify(root) == []


def test_a_changed_file_is_reported_by_name(tmp_path: Path) -> None:
    tool = _fetch_upstream()
    root = require("upstream-crds").parent
    for fx in tool.FIXTURES:
        target = tmp_path / fx.local
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((root / fx.local).read_bytes())
    edited = tmp_path / tool.FIXTURES[0].local
    edited.write_bytes(edited.read_bytes() + b"\n# edited\n")
    (tmp_path / tool.FIXTURES[1].local).unlink()
    assert tool.verify(tmp_path) == [
        f"{edited}: sha256 differs from kubernetes-sigs/jobset@f22e565ac3cc",
        f"{tmp_path / tool.FIXTURES[1].local}: missing",
    ]
