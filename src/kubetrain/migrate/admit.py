"""Every converted or fixed object goes through kubetrain's own admission and render.

No rule is written here: the TrainJob is admitted by ``validate_trainjob`` against the runtime it
references (a generated one, or a default ClusterTrainingRuntime as the API server stores it),
runtimes by ``validate_runtime``, and ``render`` must produce the JobSet without error.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.access import obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.schema import apply_defaults
from kubetrain.runtime.config import Environment
from kubetrain.runtime.core import CLUSTER_TRAINING_RUNTIME, runtime_ref
from kubetrain.runtime.defaults import default_runtimes
from kubetrain.runtime.framework import RenderError
from kubetrain.runtime.podspec import tree_copy
from kubetrain.runtime.render import render
from kubetrain.runtime.validate import runtime_webhook_enabled, validate_runtime, validate_trainjob

__all__ = ["admission_errors", "find_runtime"]

Obj = dict[str, Any]
_RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
# The check renders objects and throws them away: MPI's Secret needs a key pair, not a real one.
_CHECK_ENV = Environment(ssh_keypair=lambda: ("unused", "unused"))


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name")) if isinstance(meta, dict) else "<no metadata>"


def _stored(runtime: Obj) -> Obj:
    out: Obj = apply_defaults(tree_copy(runtime))
    return out


def find_runtime(job: Obj, runtimes: list[Obj]) -> Obj | None:
    """The runtime a TrainJob references, as stored: from ``runtimes`` first, else the defaults."""
    _, kind, name = runtime_ref(job)
    meta = job.get("metadata")
    namespace = (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
    for rt in runtimes:
        meta = rt.get("metadata")
        if not isinstance(meta, dict):
            continue
        if rt.get("kind") != kind or meta.get("name") != name:
            continue
        if kind == "TrainingRuntime" and (meta.get("namespace") or "default") != namespace:
            continue
        return _stored(rt)
    if kind == CLUSTER_TRAINING_RUNTIME:
        for rt in default_runtimes():
            if obj_at(rt, "metadata").get("name") == name:
                return _stored(rt)
    return None


def admission_errors(
    objects: list[Obj], *, known_runtimes: list[Obj] | None = None
) -> list[FieldError]:
    """Every admission error of ``objects`` (runtimes first), paths prefixed by the object."""
    errors: list[FieldError] = []
    runtimes = [o for o in objects if o.get("kind") in _RUNTIME_KINDS]
    for rt in runtimes:
        who = f"{rt.get('kind')} {_name(rt)}"
        verdict = validate_runtime(rt, webhook=runtime_webhook_enabled(rt))
        errors += [FieldError(f"{who}: {e.path}", e.reason, e.type) for e in verdict.errors]
    for job in (o for o in objects if o.get("kind") == "TrainJob"):
        who = f"TrainJob {_name(job)}"
        runtime = find_runtime(job, [*runtimes, *(known_runtimes or [])])
        verdict = validate_trainjob(job, runtime)
        errors += [FieldError(f"{who}: {e.path}", e.reason, e.type) for e in verdict.errors]
        if verdict.errors or runtime is None:
            continue
        try:
            render(job, runtime, environment=_CHECK_ENV)
        except RenderError as exc:
            errors.append(FieldError(who, f"cannot be rendered: {exc}"))
    return errors
