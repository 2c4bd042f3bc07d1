"""kubetrain's sanity bounds: what the CRD schema lets through but no engine can run.

The schema bounds every integer by its Go type (`kubetrain.api.schema`); this adds what
makes a TrainJob runnable at all, checked before anything is built from it (a numNodes of
two billion passes int32 and would have the controller build two billion endpoints):

- ``numNodes`` is >= 1 and <= ``Environment.max_num_nodes`` (1000 unless configured);
- ``numProcPerNode``, when an integer, is >= 1 (MPI writes it into the hostfile as slots);
- a runtime has at least one replicated job, each with replicas >= 1;
- the TrainJob's name leaves room for the names it generates: the JobSet's Jobs are
  ``<name>-<replicatedJob>-<index>`` (a label value, at most 63 characters) and their pods'
  hostnames ``<job>-<completion index>`` (a DNS label, at most 63 characters).

`validate_trainjob`/`validate_runtime` call these (so ``kubetrain validate``, admission and
``kubetrain render`` refuse alike), and `render` calls them again for objects stored before.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.access import as_dict, as_int, as_str, list_at, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.runtime.config import DEFAULT_MAX_NUM_NODES
from kubetrain.runtime.core import ANCESTOR_LABEL
from kubetrain.runtime.podspec import Obj

__all__ = ["DEFAULT_MAX_NUM_NODES", "runtime_bound_errors", "trainjob_bound_errors"]

_LABEL_MAX = 63


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _num_nodes(path: str, value: Any, max_nodes: int) -> list[FieldError]:
    if not _is_int(value):
        return []
    if value < 1:
        return [FieldError(path, f"Invalid value: {value}: must be >= 1")]
    if value > max_nodes:
        return [
            FieldError(
                path,
                f"Invalid value: {value}: must be <= {max_nodes} (kubetrain's sanity limit, "
                f"Environment.max_num_nodes; maxNumNodes in the local engine's engine.yaml)",
            )
        ]
    return []


def _num_proc(path: str, value: Any) -> list[FieldError]:
    if _is_int(value) and value < 1:
        return [FieldError(path, f"Invalid value: {value}: must be >= 1")]
    return []


def _replicated_jobs(runtime: Obj) -> list[Any]:
    return list_at(runtime, "spec", "template", "spec", "replicatedJobs")


def runtime_bound_errors(
    runtime: Obj, *, max_num_nodes: int = DEFAULT_MAX_NUM_NODES
) -> list[FieldError]:
    """The runtime's own fields (paths from the runtime's root)."""
    spec = obj_at(runtime, "spec")
    ml = obj_at(spec, "mlPolicy")
    errors = _num_nodes("spec.mlPolicy.numNodes", ml.get("numNodes"), max_num_nodes)
    for policy in ("torch", "mpi"):
        nproc = obj_at(ml, policy).get("numProcPerNode")
        errors += _num_proc(f"spec.mlPolicy.{policy}.numProcPerNode", nproc)
    base = "spec.template.spec.replicatedJobs"
    jobs = _replicated_jobs(runtime)
    if not jobs:
        errors.append(
            FieldError(
                base, "Required value: a runtime needs at least one replicated job", "Required"
            )
        )
    for i, job in enumerate(jobs):
        job = as_dict(job)
        tspec = obj_at(job, "template", "spec")
        # Each of these multiplies the pods (and endpoints) a job builds: bounded like numNodes.
        for path, value, least in (
            (f"{base}[{i}].replicas", job.get("replicas"), 1),
            (f"{base}[{i}].template.spec.parallelism", tspec.get("parallelism"), 0),
            (f"{base}[{i}].template.spec.completions", tspec.get("completions"), 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            if value < least:
                errors.append(FieldError(path, f"Invalid value: {value}: must be >= {least}"))
            elif value > max_num_nodes:
                errors.append(
                    FieldError(
                        path,
                        f"Invalid value: {value}: must be <= {max_num_nodes} (kubetrain's sanity limit)",
                    )
                )
    return errors


def _generated(name: str, runtime: Obj, num_nodes: int) -> list[tuple[str, list[str], int]]:
    """Per replicated job: its name, the longest Job name and pod hostname it would give,
    and how many pods it would run."""
    out = []
    for job in _replicated_jobs(runtime):
        job = as_dict(job)
        template = obj_at(job, "template")
        ancestor = obj_at(template, "metadata", "labels").get(ANCESTOR_LABEL)
        tspec = obj_at(template, "spec")
        pods = max(as_int(tspec.get("completions"), as_int(tspec.get("parallelism"), 1)), 1)
        if ancestor == "trainer":
            pods = max(pods, num_nodes)
        replicas = max(as_int(job.get("replicas"), 1), 1)
        job_name = f"{name}-{job.get('name', '')}-{replicas - 1}"
        out.append(
            (str(job.get("name", "")), [job_name, f"{job_name}-{pods - 1}"], replicas * pods)
        )
    return out


def trainjob_bound_errors(
    trainjob: Obj, runtime: Obj | None, *, max_num_nodes: int = DEFAULT_MAX_NUM_NODES
) -> list[FieldError]:
    """The TrainJob's fields, and its name against what it generates from ``runtime``."""
    spec = obj_at(trainjob, "spec")
    trainer = obj_at(spec, "trainer")
    errors = _num_nodes("spec.trainer.numNodes", trainer.get("numNodes"), max_num_nodes)
    errors += _num_proc("spec.trainer.numProcPerNode", trainer.get("numProcPerNode"))
    if runtime is None:
        return errors
    for e in runtime_bound_errors(runtime, max_num_nodes=max_num_nodes):
        errors.append(FieldError("spec.runtimeRef", f"the runtime's {e.path}: {e.reason}"))
    if errors:
        return errors
    ml = obj_at(runtime, "spec", "mlPolicy")
    nodes = as_int(trainer.get("numNodes"), as_int(ml.get("numNodes"), 1))
    name = as_str(obj_at(trainjob, "metadata").get("name"))
    generated = _generated(name, runtime, nodes)
    for job, _, pods in generated:
        if pods > max_num_nodes:
            errors.append(
                FieldError(
                    "spec.runtimeRef",
                    f"the runtime's replicated job {job!r} would run {pods} pods (replicas "
                    f"times pods per Job); kubetrain's sanity limit is {max_num_nodes}",
                )
            )
    if isinstance(name, str) and name and not errors:
        too_long = [n for _, names, _ in generated for n in names if len(n) > _LABEL_MAX]
        if too_long:
            worst = max(too_long, key=len)
            errors.append(
                FieldError(
                    "metadata.name",
                    f"Invalid value: {name!r}: too long for this runtime: it would name a Job or "
                    f"pod {worst!r} ({len(worst)} characters; names and label values are at "
                    f"most {_LABEL_MAX}); shorten it by {len(worst) - _LABEL_MAX}",
                    "TooLong",
                )
            )
    return errors
