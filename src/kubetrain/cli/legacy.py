"""Old manifests in the CLI: v1 jobs converted for ``migrate``, ``run`` and ``apply``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from kubetrain.api.access import obj_at

if TYPE_CHECKING:
    from kubetrain.migrate import Conversion

__all__ = [
    "add_convert_argument",
    "convert_documents",
    "convert_v1_objects",
    "print_migrate_error",
    "print_report",
]

Obj = dict[str, Any]


def add_convert_argument(parser: Any) -> None:
    """``--convert``: send Training Operator v1 jobs to a cluster as TrainJobs."""
    parser.add_argument(
        "--convert",
        action="store_true",
        help="convert Training Operator v1 jobs (PyTorchJob, TFJob, ...) into TrainJobs before"
        " sending them to a cluster (always done on the local engine)",
    )
    parser.add_argument(
        "--env-shim",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="when converting v1 jobs, set v1's env contract (default; see kubetrain migrate)",
    )


def convert_documents(docs: list[tuple[str, Any]], *, env_shim: bool) -> list[Conversion]:
    """Convert every document, or raise one MigrateError naming every refused document."""
    from kubetrain.api.errors import FieldError
    from kubetrain.migrate import MigrateError, convert

    out: list[Conversion] = []
    errors: list[FieldError] = []
    for source, doc in docs:
        try:
            out.append(convert(doc, env_shim=env_shim, source=source))
        except MigrateError as exc:
            errors += [FieldError(f"{exc.what}: {e.path}" if e.path else exc.what, e.reason, e.type)
                       for e in exc.errors]  # fmt: skip
    if errors:
        raise MigrateError("", errors)
    if not out:
        raise MigrateError("", [FieldError("", "no documents to convert")])
    return out


def print_report(conversions: list[Conversion], fmt: str = "text") -> None:
    """The report on stderr: one block per job (text) or one JSON array."""
    if fmt == "json":
        print(json.dumps([c.report_dict() for c in conversions], indent=2), file=sys.stderr)
        return
    for c in conversions:
        target = (
            f"TrainingRuntime {c.runtime_name} (generated)"
            if c.generated_runtime
            else f"ClusterTrainingRuntime {c.runtime_name}"
        )
        print(f"{c.source_kind} {c.name} -> TrainJob {c.name} on {target}", file=sys.stderr)
        if not c.report:
            print("  every field converted unchanged", file=sys.stderr)
        for item in c.report:
            print(f"  {item}", file=sys.stderr)


def print_migrate_error(exc: Exception) -> None:
    from kubetrain.migrate import MigrateError

    if isinstance(exc, MigrateError):
        if exc.what:
            print(f"error: {exc.what}", file=sys.stderr)
        for e in exc.errors:
            print(f"error: {e}", file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)


def convert_v1_objects(
    objs: list[Obj], *, local: bool, allowed: bool, env_shim: bool = True
) -> list[Obj]:
    """``run``/``apply``: v1 jobs become their TrainJob (+ runtime), the report goes to stderr.

    Against a cluster only with ``--convert``: a cluster may still run Training Operator v1.
    """
    from kubetrain.client.errors import ClientError
    from kubetrain.migrate import is_v1_job

    v1 = [o for o in objs if is_v1_job(o)]
    if not v1:
        return objs
    if not local and not allowed:
        names = ", ".join(f"{o['kind']}/{obj_at(o, 'metadata').get('name')}" for o in v1)
        raise ClientError(
            f"{names}: Training Operator v1 kinds are sent to a cluster only with --convert"
            " (the cluster may run Training Operator v1 itself); kubetrain migrate shows the result"
        )
    from kubetrain.migrate import MigrateError

    try:
        conversions = convert_documents([("", o) for o in v1], env_shim=env_shim)
    except MigrateError as exc:
        raise ClientError("\n".join(f"error: {e}" for e in exc.errors)[len("error: ") :]) from None
    print_report(conversions)
    by_id = {id(o): c for o, c in zip(v1, conversions, strict=True)}
    out: list[Obj] = []
    for o in objs:
        out.extend(by_id[id(o)].objects if id(o) in by_id else [o])
    return out
