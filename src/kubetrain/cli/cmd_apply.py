"""``kubetrain apply -f FILE...``: create or update objects with server-side apply.

Every document is checked before any is sent (metadata syntax everywhere, the Trainer
admission rules for TrainJobs and runtimes, against runtimes from the files or the server):
one bad document applies nothing. ``--continue-on-error`` applies what it can, as kubectl.
"""

from __future__ import annotations

import argparse
from typing import Any

from kubetrain.api.access import obj_at

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kubetrain.cli.legacy import add_convert_argument
    from kubetrain.client.connection import add_connection_arguments

    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="PATH",
        help="file, folder or - (stdin); repeatable; YAML or JSON, many documents per file",
    )
    parser.add_argument(
        "--force-conflicts",
        action="store_true",
        help="take over fields another manager owns instead of failing",
    )
    parser.add_argument(
        "-o", "--output", choices=["name", "yaml", "json"], help="print the applied objects"
    )
    add_convert_argument(parser)
    parser.add_argument(
        "--continue-on-error",
        action="store_true",
        help="apply every document the server accepts and report the others, as kubectl does "
        "(default: check all first and apply nothing if one is invalid)",
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kubetrain.cli.present import guarded

    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from kubetrain.cli.legacy import convert_v1_objects
    from kubetrain.cli.present import dump, print_error
    from kubetrain.client.connection import connect_from_args
    from kubetrain.client.errors import ClientError
    from kubetrain.client.files import read_objects
    from kubetrain.client.jobs import JobClient

    objs = read_objects(args.filename)  # all files read before anything is sent
    failed = 0
    conn = connect_from_args(args)
    try:
        objs = convert_v1_objects(
            objs, local=conn.local, allowed=args.convert, env_shim=args.env_shim
        )
    except BaseException:
        conn.close()
        raise
    with JobClient(conn) as jc:
        if not args.continue_on_error:
            problems = _preflight(objs, jc)
            if problems:
                for line in problems:
                    print_error(line)
                print_error(f"nothing applied: {len(problems)} error(s) in {len(objs)} document(s)")
                return 1
        applied = []
        for i, obj in enumerate(objs):
            try:
                result = jc.apply_one(obj, force=args.force_conflicts)
            except ClientError as err:
                if not args.continue_on_error:
                    raise
                failed += 1
                print_error(f"{_where(i, obj)}: {err}")
                continue
            applied.append(result.obj)
            if args.output == "name":
                print(f"{result.info.qualified}/{result.name}", flush=True)
            elif args.output is None:
                print(result, flush=True)
    if args.output in ("yaml", "json"):
        dump(
            applied[0]
            if len(applied) == 1
            else {"apiVersion": "v1", "kind": "List", "items": applied},
            args.output,
        )
    return 1 if failed else 0


def _where(index: int, obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = (meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""
    kind = obj.get("kind", "?") if isinstance(obj, dict) else "?"
    return f"document {index + 1} ({kind} {name})".replace(" )", ")")


def _preflight(objs: list[dict[str, Any]], jc: Any) -> list[str]:
    """Every error of every document, found without changing anything."""
    from kubetrain.api.objectmeta import document_errors
    from kubetrain.cli.cmd_render import find_runtime
    from kubetrain.client.errors import ClientError
    from kubetrain.runtime.core import runtime_ref
    from kubetrain.runtime.validate import (
        runtime_webhook_enabled,
        validate_runtime,
        validate_trainjob,
    )

    trainer = "trainer.kubeflow.org/v1alpha1"
    runtimes = [
        o for o in objs
        if o.get("apiVersion") == trainer and o.get("kind") in ("TrainingRuntime", "ClusterTrainingRuntime")
    ]  # fmt: skip
    problems: list[str] = []
    for i, obj in enumerate(objs):
        found = document_errors(obj)
        if not found and obj in runtimes:
            found = validate_runtime(obj, webhook=runtime_webhook_enabled(obj)).errors
        elif not found and obj.get("apiVersion") == trainer and obj.get("kind") == "TrainJob":
            runtime = find_runtime(obj, runtimes)
            if runtime is None:
                _, kind, name = runtime_ref(obj)
                scope = (
                    obj_at(obj, "metadata").get("namespace") if kind == "TrainingRuntime" else None
                )
                try:
                    info = jc.kind_of({"apiVersion": trainer, "kind": kind})
                    runtime = jc.find(info, name, scope)
                except ClientError:
                    runtime = None
            # Without the runtime the server's answer decides (it may be created meanwhile).
            if runtime is not None:
                found = validate_trainjob(obj, runtime).errors
        problems += [f"{_where(i, obj)}: {e}" for e in found]
    return problems
