"""Where tests find upstream's published files, and how they skip without them.

Upstream's CRDs and default runtimes are test data, never part of the repository. They are looked
for, in order, in ``$KUBETRAIN_UPSTREAM_DATA``, in ``shared/`` beside the checkout (the project's
workspace), and in ``.upstream/`` (what ``tools/fetch_upstream.py`` downloads). A test that needs
a missing file skips and names it; everything else in the test still runs where it can (schema
checks of rendered JobSets fall back to the project's own JobSet CRD, which is itself compared
with upstream's where upstream's is present).

Imported by name: ``tests/`` is on ``sys.path`` under pytest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _hint(relative: str) -> str:
    if relative.startswith("upstream-"):
        return "run `python tools/fetch_upstream.py` to fetch upstream's files"
    return "request bodies captured from the official SDK, kept outside the repository"


def roots() -> list[Path]:
    """The folders searched for upstream data, first match wins."""
    override = os.environ.get("KUBETRAIN_UPSTREAM_DATA")
    if override is not None:
        return [Path(override)]
    return [REPO.parent / "shared", REPO / ".upstream"]


def find(relative: str) -> Path | None:
    """``relative`` (e.g. ``upstream-crds/jobset.x-k8s.io_jobsets.yaml``) under the first root holding it."""
    for root in roots():
        path = root / relative
        if path.exists():
            return path
    return None


def require(relative: str) -> Path:
    """The path of an upstream file or folder; the calling test skips, naming it, when absent."""
    path = find(relative)
    if path is None:
        pytest.skip(f"upstream fixture {relative} is missing ({_hint(relative)})")
    return path


def params(folder: str, pattern: str = "*.yaml") -> list[Any]:
    """Parametrize values: every file of an upstream folder, or one skipped case naming it."""
    path = find(folder)
    files = sorted(path.glob(pattern)) if path is not None else []
    if files:
        return files
    reason = f"upstream fixture folder {folder} is missing ({_hint(folder)})"
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="missing")]


def jobset_crd() -> Path:
    """Upstream's JobSet CRD where present, else the project's own (checked equal elsewhere)."""
    found = find("upstream-crds/jobset.x-k8s.io_jobsets.yaml")
    if found is not None:
        return found
    return REPO / "src" / "kubetrain" / "api" / "crds" / "jobset.x-k8s.io_jobsets.yaml"


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of ``obj`` that a structural ``schema`` would prune silently (jsonschema does not
    flag them), as paths such as ``.spec.trainer.x``."""
    if isinstance(obj, dict):
        props = schema.get("properties")
        if props is None:
            extra = schema.get("additionalProperties")
            sub = extra if isinstance(extra, dict) else {}
            return [e for k, v in obj.items() for e in unknown_fields(v, sub, f"{path}.{k}")]
        out = [f"{path}.{k}" for k in obj if k not in props]
        return out + [
            e
            for k, v in obj.items()
            if k in props
            for e in unknown_fields(v, props[k], f"{path}.{k}")
        ]
    if isinstance(obj, list):
        return [
            e
            for i, v in enumerate(obj)
            for e in unknown_fields(v, schema.get("items", {}), f"{path}[{i}]")
        ]
    return []
