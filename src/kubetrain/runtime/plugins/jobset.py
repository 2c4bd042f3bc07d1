"""JobSet plugin: validation of runtime/initializer/patch wiring, pod network, the JobSet itself,
and TrainJob status from the JobSet (trainer v2.3.0 pkg/runtime/framework/plugins/jobset/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from kubetrain.api.access import as_dict, as_int, as_str, dicts, list_at, obj_at
from kubetrain.api.core import ObjectMeta
from kubetrain.api.errors import FieldError
from kubetrain.api.types import Trainer
from kubetrain.runtime.core import ANCESTOR_LABEL, convert_env_list
from kubetrain.runtime.framework import BuildContext, ValidationContext, owner_reference
from kubetrain.runtime.info import RuntimeInfo
from kubetrain.runtime.podspec import Obj, child_obj, upsert_env
from kubetrain.runtime.status import jobset_status_to_trainjob

__all__ = ["JobSetPlugin", "is_domain_prefixed_path", "new"]

_RUNTIME_REF = "spec.runtimeRef"
_PATCHES = "spec.runtimePatches"
_INITIALIZER_VOLUME = "initializer"

# apimachinery's IsDNS1123Subdomain and IsDomainPrefixedPath, with their messages.
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_DNS1123_SUBDOMAIN = re.compile("^" + _DNS1123_SUBDOMAIN_FMT + "$")
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile("^" + _HTTP_PATH_FMT + "$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.',"
    " and must start and end with an alphanumeric character (e.g. 'example.com', regex used for"
    f" validation is '{_DNS1123_SUBDOMAIN_FMT}')"
)


def is_domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    """apimachinery ``IsDomainPrefixedPath``: ``<DNS-1123 subdomain>/<non-empty http path>``."""
    if not value:
        return [FieldError(path, "Required value", "Required")]
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        return [FieldError(path, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors: list[FieldError] = []
    if len(host) > 253:
        errors.append(FieldError(path, "must be no more than 253 characters"))
    if not _DNS1123_SUBDOMAIN.match(host):
        errors.append(FieldError(path, _SUBDOMAIN_MSG))
    if not _HTTP_PATH.match(rest):
        errors.append(
            FieldError(path, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')")
        )
    return errors


def _names(items: Any) -> list[str]:
    return [c["name"] for c in dicts(items) if isinstance(c.get("name"), str)]


def _containers(
    jobs: Iterable[Obj],
) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[Any]]]:
    """Container names (init and regular, pooled) per job, and volume mounts per container."""
    names: dict[str, set[str]] = {}
    mounts: dict[tuple[str, str], list[Any]] = {}
    for rjob in jobs:
        jname = rjob.get("name")
        if not isinstance(jname, str):
            continue
        pod = obj_at(rjob, "template", "spec", "template", "spec")
        names[jname] = set(_names(pod.get("initContainers"))) | set(_names(pod.get("containers")))
        for c in list_at(pod, "containers"):
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                mounts.setdefault((jname, c["name"]), []).extend(list_at(c, "volumeMounts"))
    return names, mounts


class JobSetPlugin:
    """Builds the JobSet ``TJ``; the only status provider."""

    name = "jobset"

    # --- phase 1 ------------------------------------------------------------------------------

    def validate(self, info: RuntimeInfo, job: Obj, ctx: ValidationContext) -> list[FieldError]:
        errors: list[FieldError] = []
        spec = obj_at(job, "spec")
        containers_by_job, mounts = _containers(info.iter_replicated_jobs())
        initializer = obj_at(spec, "initializer")
        for key, step, config in (
            ("dataset", "dataset-initializer", "datasetConfig"),
            ("model", "model-initializer", "modelConfig"),
        ):
            if initializer.get(key) is None:
                continue
            found = containers_by_job.get(step)
            if found is None:
                reason = f"must have {step} job when trainJob is configured with input {config}"
            elif step not in found:
                reason = f"must have container with name - {step} in the {step} job"
            elif not any(
                as_dict(m).get("name") == _INITIALIZER_VOLUME for m in mounts.get((step, step), [])
            ):
                reason = (
                    f"must have volumeMount with name - {_INITIALIZER_VOLUME} in container {step}"
                    f" of the {step} job"
                )
            else:
                continue
            errors.append(FieldError(_RUNTIME_REF, reason))

        errors.extend(self._patches_immutability(job, ctx))

        # Patches are checked against what the runtime itself declares. (Upstream checks the
        # already-patched spec, where a patched-in job or container always "exists", so these
        # checks never fire there and the bad JobSet fails at reconcile instead.)
        declared = containers_by_job
        if ctx.runtime is not None:
            declared, _ = _containers(
                dicts(obj_at(ctx.runtime, "spec", "template", "spec").get("replicatedJobs"))
            )
        for patch in list_at(spec, "runtimePatches"):
            patch = as_dict(patch)
            manager = patch.get("manager")
            errors.extend(is_domain_prefixed_path(f"{_PATCHES}.manager", as_str(manager)))
            pspec = obj_at(patch, "trainingRuntimeSpec", "template").get("spec")
            if not isinstance(pspec, dict):
                continue
            for rpatch in list_at(pspec, "replicatedJobs"):
                rpatch = as_dict(rpatch)
                rname = rpatch.get("name")
                known = declared.get(rname) if isinstance(rname, str) else None
                if known is None:
                    errors.append(
                        FieldError(
                            _PATCHES,
                            "must not have replicated job that doesn't exist in the runtime job template",
                        )
                    )
                    continue
                pod_patch = obj_at(rpatch, "template", "spec", "template", "spec")
                for c in list_at(pod_patch, "initContainers"):
                    if as_dict(c).get("name") not in known:
                        errors.append(
                            FieldError(
                                _PATCHES,
                                f"must not have initContainer that doesn't exist in the runtime job {rname}",
                            )
                        )
                for c in list_at(pod_patch, "containers"):
                    c = as_dict(c)
                    if c.get("name") not in known:
                        errors.append(
                            FieldError(
                                _PATCHES,
                                f"must not have container that doesn't exist in the runtime job {rname}",
                            )
                        )
                    elif list_at(c, "env") and c.get("name") in (
                        "dataset-initializer",
                        "model-initializer",
                        "node",
                    ):
                        errors.append(
                            FieldError(
                                _PATCHES,
                                "must not have envs for the dataset-initializer, model-initializer, node containers",
                            )
                        )
        return errors

    @staticmethod
    def _patches_immutability(job: Obj, ctx: ValidationContext) -> list[FieldError]:
        old = ctx.old
        if old is None:
            return []
        new_spec, old_spec = obj_at(job, "spec"), obj_at(old, "spec")
        # Go's DeepEqual on the typed slices: nil and empty are different, absent means nil.
        if new_spec.get("runtimePatches") == old_spec.get("runtimePatches"):
            return []
        if old_spec.get("suspend") is not True and new_spec.get("suspend") is not True:
            return [
                FieldError(
                    _PATCHES,
                    "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
                    "Forbidden",
                )
            ]
        errors: list[FieldError] = []
        if ctx.jobset is not None:
            for st in list_at(ctx.jobset, "status", "replicatedJobsStatus"):
                st = as_dict(st)
                if as_int(st.get("active"), 0) > 0:
                    errors.append(
                        FieldError(
                            _PATCHES,
                            "RuntimePatches cannot be modified when the JobSet's ReplicatedJob"
                            f" {st.get('name', '')} is still active",
                            "Forbidden",
                        )
                    )
        return errors

    # --- phase 4 ------------------------------------------------------------------------------

    def identify_pod_network(self, info: RuntimeInfo, job: Obj) -> None:
        name = info.trainjob_name
        subdomain = obj_at(info.jobset_spec, "network").get("subdomain")
        if not isinstance(subdomain, str):
            # Go checks only for nil: an explicit "" subdomain is used as is.
            subdomain = name
        for ps in info.pod_sets:
            ps.endpoints = [
                f"{name}-{ps.name}-{replica}-{pod}.{subdomain}"
                for replica in range(max(ps.replicas, 0))
                for pod in range(ps.count)
            ]

    # --- phase 5 ------------------------------------------------------------------------------

    def sync_parallel_count(self, info: RuntimeInfo) -> None:
        jobs = {j.get("name"): j for j in info.iter_replicated_jobs()}
        for ps in info.pod_sets:
            rjob = jobs.get(ps.name)
            if rjob is None:
                continue
            job_spec = child_obj(child_obj(rjob, "template"), "spec")
            job_spec["parallelism"] = ps.count
            job_spec["completions"] = ps.count

    # --- phase 6 ------------------------------------------------------------------------------

    def build(self, info: RuntimeInfo, job: Obj, ctx: BuildContext) -> list[Obj]:
        spec = obj_at(job, "spec")
        suspend = spec.get("suspend") is True
        old = ctx.existing.get("JobSet", info.trainjob_name)
        if old is not None and not suspend and obj_at(old, "spec").get("suspend") is not True:
            # A running JobSet is never updated (trainer v2.3.0 pkg/runtime/framework/plugins/jobset/jobset.go).
            return []
        launcher_as_node = as_dict(info.policy("mpi")).get("runLauncherAsNode") is True
        initializer = obj_at(spec, "initializer")
        trainer = info.trainer
        for rjob in info.iter_replicated_jobs():
            template = obj_at(rjob, "template")
            ancestor = obj_at(template, "metadata", "labels").get(ANCESTOR_LABEL)
            pod_template = obj_at(template, "spec", "template")
            pod = obj_at(pod_template, "spec")
            if ancestor in ("dataset-initializer", "model-initializer"):
                rjob["replicas"] = 1
                source = initializer.get(
                    "dataset" if ancestor == "dataset-initializer" else "model"
                )
                if isinstance(source, dict):
                    for c in list_at(pod, "containers"):
                        if isinstance(c, dict) and c.get("name") == ancestor:
                            _wire_initializer(c, source)
            if ancestor == "trainer":
                rjob["replicas"] = 1
                if trainer is not None:
                    for c in list_at(pod, "containers"):
                        if isinstance(c, dict) and c.get("name") == "node":
                            _set_trainer_fields(c, trainer)
            if trainer is not None and (
                ancestor == "trainer" or (launcher_as_node and rjob.get("name") == "node")
            ):
                for c in list_at(pod, "containers"):
                    if isinstance(c, dict) and c.get("name") == "node":
                        upsert_env(c, *convert_env_list(trainer.get("env")))
            if info.pod_labels:
                meta = child_obj(pod_template, "metadata")
                child_obj(meta, "labels").update(info.pod_labels)
            if info.pod_annotations:
                meta = child_obj(pod_template, "metadata")
                child_obj(meta, "annotations").update(info.pod_annotations)
        jobset_spec = info.jobset_spec
        jobset_spec["suspend"] = suspend
        metadata: ObjectMeta = {"name": info.trainjob_name, "namespace": info.trainjob_namespace}
        if info.labels:
            metadata["labels"] = dict(info.labels)
        if info.annotations:
            metadata["annotations"] = dict(info.annotations)
        metadata["ownerReferences"] = [owner_reference(info)]
        return [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": metadata,
                "spec": jobset_spec,
            }
        ]

    # --- phase 7 ------------------------------------------------------------------------------

    def trainjob_status(self, job: Obj, jobset: Obj | None, now: datetime) -> Obj | None:
        return jobset_status_to_trainjob(job, jobset, now)


def _wire_initializer(container: Obj, source: Obj) -> None:
    storage_uri = source.get("storageUri")
    if storage_uri is not None:
        upsert_env(container, {"name": "STORAGE_URI", "value": storage_uri})
    upsert_env(container, *convert_env_list(source.get("env")))
    secret = source.get("secretRef")
    if isinstance(secret, dict):
        env_from = container.get("envFrom")
        if not isinstance(env_from, list):
            env_from = []
            container["envFrom"] = env_from
        env_from.append({"secretRef": {"name": secret.get("name", "")}})


def _set_trainer_fields(container: Obj, trainer: Trainer) -> None:
    image = trainer.get("image")
    if image is not None:
        container["image"] = image
    for key in ("command", "args"):
        value = trainer.get(key)
        if isinstance(value, list):
            if value:
                container[key] = list(value)
            else:
                # Go sets an empty non-nil slice, which omitempty then drops from the apply.
                container.pop(key, None)


def new(gates: object, env: object) -> JobSetPlugin:
    """Always active."""
    return JobSetPlugin()
