"""``kubetrain render -f FILE``: every object a TrainJob would create, then the TrainJob with the
status the controller writes at its first reconcile (a dry run of one reconcile)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import obj_at

# The admission helpers below are shared with ``kubetrain validate``.
__all__ = ["Inputs", "add_arguments", "add_file_arguments", "admit", "load_inputs", "run"]

Obj = dict[str, Any]
_RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")


def add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """``-f FILE`` (repeatable; files, multi-document files or folders) and ``--feature-gates``."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="a YAML/JSON file, multi-document file, or folder (repeatable)",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="Name=bool,...",
        help="feature gates over kubetrain's defaults (TrainJobStatus=true)",
    )


@dataclass
class Inputs:
    """What ``-f`` held."""

    trainjobs: list[Obj] = field(default_factory=list)
    runtimes: list[Obj] = field(default_factory=list)


def print_errors(lines: list[str]) -> None:
    """One line per error on stderr."""
    for line in lines:
        print(line, file=sys.stderr)


def load_inputs(paths: list[str]) -> Inputs | None:
    """Load and sort the documents; on failure print the errors and return None."""
    from kubetrain.api.errors import LoadError
    from kubetrain.api.load import load_files

    try:
        objects = load_files(paths)
    except LoadError as exc:
        # Field paths speak for themselves; an error without one (YAML syntax) needs its file.
        print_errors(
            [f"{exc.source}: {e}" if not e.path else str(e) for e in exc.errors] or [str(exc)]
        )
        return None
    except OSError as exc:
        print_errors([f"{exc.filename}: {exc.strerror}"])
        return None
    inputs = Inputs()
    other: list[str] = []
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind == "TrainJob":
            inputs.trainjobs.append(obj)
        elif kind in _RUNTIME_KINDS:
            inputs.runtimes.append(obj)
        else:
            other.append(
                f"kind: unsupported kind {kind!r}: expected TrainJob, TrainingRuntime or ClusterTrainingRuntime"
            )
    if other:
        print_errors(other)
        return None
    return inputs


def find_runtime(job: Obj, runtimes: list[Obj]) -> Obj | None:
    """The runtime a TrainJob references: from the given files first, else the defaults."""
    from kubetrain.runtime.core import CLUSTER_TRAINING_RUNTIME, runtime_ref

    _, kind, name = runtime_ref(job)
    namespace = obj_at(job, "metadata").get("namespace") or "default"
    for rt in runtimes:
        meta = obj_at(rt, "metadata")
        if rt.get("kind") != kind or meta.get("name") != name:
            continue
        if kind == "TrainingRuntime" and (meta.get("namespace") or "default") != namespace:
            continue
        return rt
    if kind == CLUSTER_TRAINING_RUNTIME:
        from kubetrain.runtime.defaults import default_runtimes

        for rt in default_runtimes():
            if obj_at(rt, "metadata").get("name") == name:
                from kubetrain.api.schema import apply_defaults
                from kubetrain.runtime.podspec import tree_copy

                # As stored by the API server: with the CRD defaults (replicas, groupName, ...).
                stored: Obj = apply_defaults(tree_copy(rt))
                return stored
    return None


def admit(inputs: Inputs, gates: Any) -> tuple[list[tuple[Obj, Obj | None]], list[str], list[str]]:
    """Validate every runtime and TrainJob; return (job, runtime) pairs, error lines, warnings."""
    from kubetrain.api.objectmeta import document_errors
    from kubetrain.runtime.validate import (
        runtime_webhook_enabled,
        validate_runtime,
        validate_trainjob,
    )

    errors: list[str] = []
    warnings: list[str] = []
    # A TrainJob's errors are exactly "<field path>: <reason>" lines unless several TrainJobs
    # were given; a runtime's errors name the runtime whenever anything else was given too.
    prefix_jobs = len(inputs.trainjobs) > 1
    prefix_runtimes = len(inputs.runtimes) > 1 or bool(inputs.trainjobs)

    def lines(obj: Obj, found: list[Any], prefixed: bool) -> list[str]:
        meta = obj.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        who = f"{obj.get('kind')} {name}: " if prefixed else ""
        return [f"{who}{e}" for e in found]

    for rt in inputs.runtimes:
        # Metadata syntax first (what the API server refuses for any kind), then the rules
        # of the kind. A runtime labelled webhook-validation=disabled skips the webhook only.
        errors.extend(lines(rt, document_errors(rt), prefix_runtimes))
        verdict = validate_runtime(rt, operation="CREATE", webhook=runtime_webhook_enabled(rt))
        errors.extend(lines(rt, verdict.errors, prefix_runtimes))
        warnings.extend(verdict.warnings)
    pairs: list[tuple[Obj, Obj | None]] = []
    for job in inputs.trainjobs:
        # A present name's format is the TrainJob CRD's own rule, reported by validate_trainjob.
        named = isinstance(obj_at(job, "metadata").get("name"), str)
        doc = [e for e in document_errors(job) if not (named and e.path == "metadata.name")]
        errors.extend(lines(job, doc, prefix_jobs))
        runtime = find_runtime(job, inputs.runtimes)
        verdict = validate_trainjob(job, runtime, gates=gates)
        errors.extend(lines(job, verdict.errors, prefix_jobs))
        warnings.extend(verdict.warnings)
        pairs.append((job, runtime))
    return pairs, errors, warnings


def parse_gates(text: str) -> Any:
    """FeatureGates, or None after printing the problem."""
    from kubetrain.runtime.config import FeatureGateError, FeatureGates

    try:
        return FeatureGates.parse(text)
    except FeatureGateError as exc:
        print_errors([f"--feature-gates: {exc}"])
        return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_file_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        choices=["yaml", "json"],
        default="yaml",
        help="output format (default: yaml)",
    )


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from kubetrain.api.dump import dump_json, dump_yaml
    from kubetrain.runtime.config import Environment
    from kubetrain.runtime.framework import RenderError
    from kubetrain.runtime.render import render
    from kubetrain.runtime.sshkeys import generate_ssh_keypair
    from kubetrain.runtime.validate import default_trainjob

    gates = parse_gates(args.feature_gates)
    if gates is None:
        return 1
    inputs = load_inputs(args.filename)
    if inputs is None:
        return 1
    if not inputs.trainjobs:
        print_errors(["-f: no TrainJob found in the given files"])
        return 1
    pairs, errors, warnings = admit(inputs, gates)
    if errors:
        print_errors(errors)
        return 1
    # A fresh SSH key per run, as the controller would make: a well-known key must never be
    # what a rendered MPI Secret holds.
    env = Environment(ssh_keypair=generate_ssh_keypair)
    out = []
    for job, runtime in pairs:
        created = obj_at(job, "metadata").get("creationTimestamp")
        try:
            now = (
                datetime.fromisoformat(str(created).replace("Z", "+00:00"))
                if created
                else datetime.now(UTC)
            )
        except ValueError:
            now = datetime.now(UTC)
        try:
            plan = render(job, runtime, gates=gates, environment=env, now=now)
        except RenderError as exc:
            print_errors([str(e) for e in exc.errors])
            return 1
        out.extend(plan.objects)
        # As the API server stores it: the mutating webhook stamps runtimePatches[].time.
        shown = default_trainjob(job, now=now)
        if plan.trainjob_status:
            shown["status"] = plan.trainjob_status
        else:
            shown.pop("status", None)
        out.append(shown)
    for w in warnings:
        print(f"Warning: {w}", file=sys.stderr)
    sys.stdout.write(dump_json(out) if args.output == "json" else dump_yaml(out))
    return 0
