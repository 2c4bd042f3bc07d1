"""What the generators in ``tools/`` share: Kubernetes' OpenAPI definitions as the
``kubernetes-validate`` package ships them, and the command line that writes a generator's
committed files or, with ``--check``, fails when they are stale."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def kube_definitions(version: str) -> dict[str, Any]:
    """The OpenAPI definitions of Kubernetes ``version`` (``"1.32.0"``), by definition name."""
    import kubernetes_validate  # type: ignore[import-untyped]  # ships no type hints

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    data = json.loads((base / f"v{version}-local" / "_definitions.json").read_text())
    defs: dict[str, Any] = data["$defs"]
    return defs


def main(
    argv: list[str] | None,
    *,
    doc: str,
    out: Path,
    render: Callable[[], dict[str, str]],
    prune: bool = False,
) -> int:
    """Write the files ``render`` returns (name -> text) into ``out``; with ``--check``, only
    name the stale ones and fail. ``prune``: ``out`` holds this generator's files alone, and
    one it no longer writes goes."""
    tool = Path(sys.argv[0]).name
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed output is stale"
    )
    parser.add_argument("--out", type=Path, default=out, help=f"where to write (default {out})")
    args = parser.parse_args(argv)
    files = render()
    stale = [
        name
        for name, text in files.items()
        if not (args.out / name).is_file() or (args.out / name).read_text() != text
    ]
    if args.check:
        for name in stale:
            print(f"{args.out / name} is stale: run tools/{tool}", file=sys.stderr)
        return 1 if stale else 0
    if prune:
        for old in sorted(args.out.glob("*")):
            if old.name not in files:
                old.unlink()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
    print(f"wrote {len(files)} file(s) to {args.out} ({len(stale)} changed)")
    return 0
