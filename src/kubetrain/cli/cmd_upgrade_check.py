"""``kubetrain upgrade-check -f FILE|DIR [--fix]``: Trainer v2.0-v2.2 manifests against v2.3.

Findings (path, severity, fix) go to stdout; exit 1 when something breaks on v2.3. With ``--fix``
the v2.3 form goes to stdout (``--in-place`` rewrites the files instead) once kubetrain's
admission accepts it; findings then go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kubetrain.api.access import obj_at

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder or - (stdin) holding TrainJobs and runtimes; repeatable",
    )
    parser.add_argument("--fix", action="store_true", help="print the v2.3 form of every object")
    parser.add_argument(
        "--in-place", action="store_true", help="with --fix: rewrite the files that change"
    )
    parser.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="findings as text or JSON"
    )


def _label(obj: Any) -> str:
    name = obj_at(obj, "metadata").get("name", "?")
    return f"{obj.get('kind')} {name}" if isinstance(obj, dict) else "document"


def run(args: argparse.Namespace) -> int:
    from kubetrain.api.dump import dump_yaml
    from kubetrain.api.errors import LoadError
    from kubetrain.cli.present import print_error
    from kubetrain.client.files import read_documents
    from kubetrain.migrate import Severity, is_trainer_object, upgrade_check, upgrade_fix
    from kubetrain.migrate.admit import admission_errors, find_runtime

    if args.in_place and not args.fix:
        print_error("--in-place needs --fix")
        return 2
    try:
        docs = read_documents(args.filename)
    except LoadError as exc:
        for line in str(exc).splitlines():
            print_error(line)
        return 1
    objs = [d for _, d in docs]
    if not any(is_trainer_object(o) for o in objs):
        print_error("no TrainJob, TrainingRuntime or ClusterTrainingRuntime in the input")
        return 1
    findings = upgrade_check(objs)
    out = sys.stderr if args.fix and not args.in_place else sys.stdout
    rows = [
        {"source": src, "object": _label(o), **f.as_dict()}
        for (src, o), fs in zip(docs, findings, strict=True)
        for f in fs
    ]
    if args.output == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        for (src, o), fs in zip(docs, findings, strict=True):
            for f in fs:
                print(f"{src}: {_label(o)}: {f}", file=out)
        if not rows:
            print("no findings: every object is written for Trainer v2.3", file=out)
    if not args.fix:
        return 1 if any(f.severity == Severity.BREAKS for fs in findings for f in fs) else 0
    fixed = upgrade_fix(objs)
    trainer = [o for o in fixed if is_trainer_object(o)]
    runtimes = [o for o in trainer if o.get("kind") != "TrainJob"]
    # TrainJobs whose runtime is neither in the input nor a default cannot be admitted here.
    checkable = [o for o in trainer if o.get("kind") != "TrainJob" or find_runtime(o, runtimes)]
    errors = admission_errors(checkable)
    left = [f for fs in upgrade_check(fixed) for f in fs if f.severity == Severity.BREAKS]
    if errors or left:
        for e in errors:
            print_error(f"after --fix: {e}")
        for f in left:
            print_error(f"after --fix: {f.path}: {f.message} (fix by hand: {f.fix})")
        return 1
    if not args.in_place:
        print(dump_yaml(fixed), end="")
        return 0
    by_file: dict[str, list[Any]] = {}
    changed: set[str] = set()
    for (src, old), new in zip(docs, fixed, strict=True):
        by_file.setdefault(src, []).append(new)
        if old != new:
            changed.add(src)
    if "<stdin>" in changed:
        print_error("--in-place cannot rewrite stdin")
        return 1
    for src in sorted(changed):
        with open(src, "w", encoding="utf-8") as stream:
            stream.write(dump_yaml(by_file[src]))
        print(f"rewrote {src}", file=sys.stderr)
    return 0
