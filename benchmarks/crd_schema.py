"""Benchmark of the CRD structural-schema work the embedded API server does per write.

Only the schema calls, in process (no HTTP, no storage writes): `CrdSchemas.prune`, `.default`
and `.validate`, as `Engine._admit` calls them, on the golden JobSet and TrainJob of
``tests/golden/torch-cpu-sdk/expected.yaml``:

- ``create``: a whole new object (nothing settled), each kind;
- ``status``: a status write of each kind (``spec`` settled: the update leaves it as stored).

Reported: CPU microseconds (``time.process_time``) per round of both kinds, median of
``--runs`` runs of ``--rounds`` rounds each. The objects are cloned before the clock starts.
CPU time, not wall time, so that figures taken on a busy machine stay comparable; compare
before/after in back-to-back runs all the same.

    .venv/bin/python benchmarks/crd_schema.py [--rounds 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from kubetrain.api import codec
from kubetrain.api.schema import crd_manifests
from kubetrain.local.apiserver.resources import Registry
from kubetrain.local.apiserver.schema import CrdSchemas
from kubetrain.local.apiserver.store import Store

__all__ = ["main"]

GOLDEN = Path(__file__).resolve().parent.parent / "tests/golden/torch-cpu-sdk/expected.yaml"

# What a JobSet and a TrainJob status write carries (as the controllers write them).
_STATUS: dict[str, dict[str, Any]] = {
    "JobSet": {
        "replicatedJobsStatus": [
            {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
        ],
        "conditions": [
            {
                "type": "StartupPolicyCompleted",
                "status": "True",
                "reason": "AllReplicatedJobsStarted",
                "message": "all replicated jobs have started",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    },
    "TrainJob": {
        "jobsStatus": [
            {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
        ],
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "JobsCreationSucceeded",
                "message": "Succeeded to create Jobs",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    },
}


def _objects() -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(GOLDEN.read_text(encoding="utf-8")))
    return [next(d for d in docs if d.get("kind") == kind) for kind in ("JobSet", "TrainJob")]


def _run(
    schemas: CrdSchemas, objects: list[dict[str, Any]], rounds: int, settled: frozenset[str]
) -> float:
    """CPU microseconds per round (prune, default, validate of each object)."""
    batch = [codec.clone(obj) for _ in range(rounds) for obj in objects]
    started = time.process_time()
    for obj in batch:
        schemas.prune(obj, settled)
        schemas.default(obj, settled)
        if schemas.validate(obj, settled):
            raise SystemExit(f"the golden {obj['kind']} is not valid")
    return (time.process_time() - started) / rounds * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    schemas = CrdSchemas(Registry.build(crd_manifests(descriptions=False)), Store(None))
    created = _objects()
    written = [{**codec.clone(obj), "status": _STATUS[obj["kind"]]} for obj in created]
    for name, objects, settled in (
        ("create", created, frozenset()),
        ("status", written, frozenset({"spec"})),
    ):
        _run(schemas, objects, 50, settled)  # compile the schemas, warm the caches
        times = [_run(schemas, objects, args.rounds, settled) for _ in range(args.runs)]
        print(
            f"{name}: {statistics.median(times):.1f} us CPU per round (JobSet + TrainJob; "
            f"median of {args.runs}, min {min(times):.1f}, max {max(times):.1f})"
        )


if __name__ == "__main__":
    main()
