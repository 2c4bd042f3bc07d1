"""Building a ``RuntimeInfo`` from a TrainJob and its runtime (upstream ``newRuntimeInfo``).

Steps, in upstream's order (trainer v2.3.0 pkg/runtime/core/trainingruntime.go):

1. JobSet labels/annotations: the runtime template's, then each patch's overlaid in list order;
   the JobSet spec: the runtime's with every patch strategically merged (``smp``), replicatedJobs
   back in runtime order;
2. one PodSet per replicatedJob: count = ``parallelism`` (default 1), or ``mlPolicy.numNodes``
   (default 1) for the trainer ancestor when the runtime has an mlPolicy; clamped to >= 1;
3. ``spec.trainer.resourcesPerNode`` strategically merged onto container ``node`` of the
   trainer-ancestor job (and, with MPI ``runLauncherAsNode``, of the job named ``node``).

Also the small shared vocabulary: runtime reference defaults and upstream's EnvVar conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubetrain.api.access import as_dict, as_int, as_list, as_str, obj_at
from kubetrain.api.labels import ANCESTOR_LABEL, TRAINER_GROUP
from kubetrain.api.labels import CLUSTER_TRAINING_RUNTIME_KIND as CLUSTER_TRAINING_RUNTIME
from kubetrain.api.labels import TRAINING_RUNTIME_KIND as TRAINING_RUNTIME
from kubetrain.api.types import Trainer
from kubetrain.runtime.config import Environment
from kubetrain.runtime.info import PodSet, RuntimeInfo
from kubetrain.runtime.podspec import Obj, child_obj, tree_copy

# Re-exported for the runtime's modules; spelled once, in kubetrain.api.labels.
__all__ = [
    "ANCESTOR_LABEL",
    "CLUSTER_TRAINING_RUNTIME",
    "TRAINER_GROUP",
    "TRAINING_RUNTIME",
    "convert_env",
    "convert_env_list",
    "new_runtime_info",
    "registry_key",
    "runtime_ref",
]


def runtime_ref(job: Obj) -> tuple[str, str, str]:
    """``(apiGroup, kind, name)`` of ``spec.runtimeRef`` with the CRD defaults filled in."""
    ref = obj_at(job, "spec", "runtimeRef")
    return (
        as_str(ref.get("apiGroup", TRAINER_GROUP)),
        as_str(ref.get("kind", CLUSTER_TRAINING_RUNTIME)),
        as_str(ref.get("name")),
    )


def registry_key(job: Obj) -> str:
    """Go's ``schema.GroupKind.String()`` of the runtimeRef: ``Kind.group`` (``Kind`` if no group)."""
    group, kind, _ = runtime_ref(job)
    return f"{kind}.{group}" if group else kind


def convert_env(env: Any) -> Obj:
    """A user EnvVar as upstream re-encodes it (``apply.EnvVar``) before upserting.

    Go copies only what its apply-configuration builder sets: ``value`` always (``""`` when
    unset) unless ``valueFrom`` is given; in ``valueFrom`` only fieldRef.fieldPath,
    resourceFieldRef (containerName, resource, divisor), configMapKeyRef and secretKeyRef (key,
    name, optional when set). Anything else in ``valueFrom`` is dropped.
    """
    e = as_dict(env)
    out: Obj = {"name": e.get("name", "")}
    source = e.get("valueFrom")
    if isinstance(source, dict):
        new_source: Obj = {}
        ref = source.get("fieldRef")
        if isinstance(ref, dict):
            new_source["fieldRef"] = {"fieldPath": ref.get("fieldPath", "")}
        res = source.get("resourceFieldRef")
        if isinstance(res, dict):
            new_source["resourceFieldRef"] = {
                "containerName": res.get("containerName", ""),
                "resource": res.get("resource", ""),
                "divisor": res.get("divisor", "0"),
            }
        for key in ("configMapKeyRef", "secretKeyRef"):
            sel = source.get(key)
            if isinstance(sel, dict):
                new_sel: Obj = {"key": sel.get("key", ""), "name": sel.get("name", "")}
                if sel.get("optional") is not None:
                    new_sel["optional"] = sel["optional"]
                new_source[key] = new_sel
        out["valueFrom"] = new_source
    else:
        value = e.get("value")
        out["value"] = value if value is not None else ""
    return out


def convert_env_list(env: Any) -> list[Obj]:
    """``convert_env`` over a list (non-lists give ``[]``)."""
    return [convert_env(e) for e in as_list(env)]


def _pod_spec(job: Obj) -> Obj:
    # Create missing levels so a PodSet always has a pod spec to edit (shipped runtimes have them).
    template = child_obj(job, "template")
    return child_obj(child_obj(child_obj(template, "spec"), "template"), "spec")


def _merge_trainer_resources(pod_spec: Obj, override: Mapping[str, Any]) -> None:
    from kubetrain.runtime.smp import merge_resources

    containers = pod_spec.get("containers")
    if not isinstance(containers, list):
        return
    for c in containers:
        if isinstance(c, dict) and c.get("name") == "node":
            base = c.get("resources")
            merged = merge_resources(base if isinstance(base, dict) else None, override)
            c["resources"] = merged
            return


def new_runtime_info(job: Obj, runtime: Obj, env: Environment) -> RuntimeInfo:
    """The RuntimeInfo before any plugin ran (what validators see, and phase 2's input)."""
    meta = obj_at(job, "metadata")
    spec = obj_at(job, "spec")
    rspec = obj_at(runtime, "spec")
    template = obj_at(rspec, "template")
    patches = spec.get("runtimePatches")
    if isinstance(patches, list) and patches:
        from kubetrain.runtime.smp import apply_runtime_patches

        template = apply_runtime_patches(template, [p for p in patches if isinstance(p, dict)])
        jobset_spec = obj_at(template, "spec")
        tmeta = obj_at(template, "metadata")
    else:
        tmeta = obj_at(template, "metadata")
        jobset_spec = tree_copy(obj_at(template, "spec"))
    labels = dict(obj_at(tmeta, "labels"))
    annotations = dict(obj_at(tmeta, "annotations"))

    ml_policy = rspec.get("mlPolicy") if isinstance(rspec.get("mlPolicy"), dict) else None
    pg_policy = (
        rspec.get("podGroupPolicy") if isinstance(rspec.get("podGroupPolicy"), dict) else None
    )
    trainer = spec.get("trainer")
    # Admission checked its shape; the TypedDict lets mypy check every read of it below.
    trainer_copy = cast(Trainer, dict(trainer)) if isinstance(trainer, dict) else None
    resources = trainer_copy.get("resourcesPerNode") if trainer_copy is not None else None
    mpi = obj_at(ml_policy, "mpi") if ml_policy is not None else {}
    launcher_as_node = ml_policy is not None and mpi.get("runLauncherAsNode") is True

    pod_sets: list[PodSet] = []
    jobs = jobset_spec.get("replicatedJobs")
    for rjob in as_list(jobs):
        if not isinstance(rjob, dict):
            continue
        job_template = obj_at(rjob, "template")
        count = as_int(obj_at(job_template, "spec").get("parallelism"), 1)
        job_labels = obj_at(job_template, "metadata", "labels")
        ancestor = job_labels.get(ANCESTOR_LABEL)
        if not isinstance(ancestor, str):
            ancestor = None
        if ancestor == "trainer" and ml_policy is not None:
            count = as_int(ml_policy.get("numNodes"), 1)
        pod_spec = _pod_spec(rjob)
        if isinstance(resources, dict) and (
            (ancestor == "trainer" and ml_policy is not None)
            or (launcher_as_node and rjob.get("name") == "node")
        ):
            _merge_trainer_resources(pod_spec, resources)
        pod_sets.append(
            PodSet(
                name=as_str(rjob.get("name")),
                ancestor=ancestor,
                count=max(count, 1),
                pod_spec=pod_spec,
                replicas=as_int(rjob.get("replicas"), 1),
                base_pod_spec=tree_copy(pod_spec) if pg_policy is not None else None,
            )
        )

    uid = meta.get("uid")
    namespace = meta.get("namespace")
    rmeta = obj_at(runtime, "metadata")
    return RuntimeInfo(
        trainjob_name=as_str(meta.get("name")),
        trainjob_namespace=namespace
        if isinstance(namespace, str) and namespace
        else env.namespace_default,
        trainjob_uid=uid if isinstance(uid, str) and uid else env.uid_placeholder,
        runtime_kind=str(runtime.get("kind", "")),
        runtime_name=str(rmeta.get("name", "")),
        labels=labels,
        annotations=annotations,
        ml_policy=ml_policy,
        pod_group_policy=pg_policy,
        jobset_spec=jobset_spec,
        pod_sets=pod_sets,
        trainer=trainer_copy,
    )
