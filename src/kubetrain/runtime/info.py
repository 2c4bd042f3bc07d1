"""The working value that flows through the plugin phases: ``RuntimeInfo`` and its ``PodSet``s.

``RuntimeInfo`` is built once per render (or validation) from the runtime and the TrainJob:

- ``jobset_spec`` is a private copy of the runtime's ``spec.template.spec`` with the TrainJob's
  ``runtimePatches`` already merged (v2.3 strategic merge, replicatedJobs back in runtime order)
  and ``spec.trainer.resourcesPerNode`` merged onto the trainer ``node`` container.
- one ``PodSet`` per replicatedJob, in order. ``PodSet.pod_spec`` *is* the pod spec dict inside
  ``jobset_spec`` (aliased, not copied): a plugin that upserts an env var into
  ``pod_set.container("node")`` edits the JobSet that will be emitted. Upstream keeps separate
  PodSet copies and upserts them back at build time; because every edit is an upsert, editing the
  spec directly yields the same lists in the same order, without the copy.
- ``trainer`` is a private shallow copy of ``TrainJob.spec.trainer`` (or ``None``). Plugins that
  rewrite the trainer command in memory (TorchTune, Flux) assign ``info.trainer["command"]``;
  the JobSet builder copies image/command/args/env from here onto the trainer container last.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_dict, as_int, obj_at
from kubetrain.api.labels import ANCESTOR_LABEL
from kubetrain.api.types import Trainer
from kubetrain.runtime.podspec import Obj, find_container

__all__ = ["PodSet", "RuntimeInfo"]


@dataclass(slots=True)
class PodSet:
    """One replicatedJob seen as a group of identical pods."""

    name: str
    """The replicatedJob name."""
    ancestor: str | None
    """Value of the job-template label ``trainer.kubeflow.org/trainjob-ancestor-step``, if any."""
    count: int
    """Pods per job replica; becomes ``parallelism`` and ``completions`` (always >= 1)."""
    pod_spec: Obj
    """The pod spec inside ``RuntimeInfo.jobset_spec`` (aliased: edits land in the output)."""
    replicas: int = 1
    """``replicatedJobs[].replicas`` (default 1)."""
    endpoints: list[str] = field(default_factory=list)
    """Pod DNS names ``TJ-<job>-<replica>-<pod>.<subdomain>``, filled in the pod-network phase."""
    base_pod_spec: Obj | None = None
    """A copy of the pod spec taken before any plugin ran (after patches and resourcesPerNode),
    kept only when the runtime has a podGroupPolicy: upstream computes a PodGroup's
    minResources from the pod as it was before plugins edited it."""

    @property
    def containers(self) -> list[Obj]:
        """Regular containers (created empty if absent)."""
        value = self.pod_spec.get("containers")
        if not isinstance(value, list):
            value = []
            self.pod_spec["containers"] = value
        return value

    @property
    def init_containers(self) -> list[Obj]:
        """Init containers (the list is created, and stored, when absent)."""
        value = self.pod_spec.get("initContainers")
        if not isinstance(value, list):
            value = []
            self.pod_spec["initContainers"] = value
        return value

    def container(self, name: str, *, init: bool = False) -> Obj | None:
        """Regular container ``name``; with ``init=True`` init containers are searched after."""
        return find_container(self.pod_spec, name, init=init)


@dataclass(slots=True)
class RuntimeInfo:
    """Everything plugins read and edit while turning one TrainJob into objects."""

    trainjob_name: str
    trainjob_namespace: str
    trainjob_uid: str
    """``metadata.uid`` as given, or ``Environment.uid_placeholder``."""
    runtime_kind: str
    runtime_name: str
    labels: dict[str, str]
    """JobSet object labels: runtime template labels, then each patch's, later wins."""
    annotations: dict[str, str]
    """JobSet object annotations, merged like ``labels``."""
    ml_policy: Obj | None
    """The runtime's ``spec.mlPolicy`` (read-only)."""
    pod_group_policy: Obj | None
    """The runtime's ``spec.podGroupPolicy`` (read-only)."""
    jobset_spec: Obj
    """The JobSet spec being built (private copy; plugins edit it through PodSets)."""
    pod_sets: list[PodSet]
    trainer: Trainer | None
    """Private shallow copy of ``TrainJob.spec.trainer``; command/args may be replaced."""
    pod_labels: dict[str, str] = field(default_factory=dict)
    """Labels every pod template gets at build time (gang scheduling)."""
    pod_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations every pod template gets at build time (gang scheduling)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Scratch space shared between phases of the same plugin (keyed by plugin name)."""

    # --- look-ups, mirroring upstream's Info helpers -------------------------------------------

    @property
    def policy_kind(self) -> str | None:
        """The configured ML policy source: torch, mpi, jax, xgboost, flux, or None."""
        if not isinstance(self.ml_policy, dict):
            return None
        for kind in ("torch", "mpi", "jax", "xgboost", "flux"):
            if self.ml_policy.get(kind) is not None:
                return kind
        return None

    def policy(self, kind: str) -> Obj | None:
        """``mlPolicy.<kind>`` as a dict when configured (``{}`` counts as configured)."""
        if not isinstance(self.ml_policy, dict):
            return None
        value = self.ml_policy.get(kind)
        return value if isinstance(value, dict) else None

    def pod_group(self, kind: str) -> Obj | None:
        """``podGroupPolicy.<kind>`` as a dict when configured (``{}`` counts as configured)."""
        value = as_dict(self.pod_group_policy).get(kind)
        return value if isinstance(value, dict) else None

    def take_num_nodes(self) -> None:
        """The trainer PodSet's count from ``spec.trainer.numNodes`` where set: the first step
        of every ML policy that counts nodes (torch, JAX, XGBoost, PlainML; MPI splits it)."""
        ps = self.trainer_pod_set()
        if ps is not None and self.trainer is not None and self.trainer.get("numNodes") is not None:
            ps.count = as_int(self.trainer.get("numNodes"), ps.count)

    def pod_set(self, name: str) -> PodSet | None:
        """The PodSet of replicatedJob ``name``."""
        for ps in self.pod_sets:
            if ps.name == name:
                return ps
        return None

    def pod_set_by_ancestor(self, ancestor: str) -> PodSet | None:
        """The first PodSet whose job template carries ancestor label ``ancestor``."""
        for ps in self.pod_sets:
            if ps.ancestor == ancestor:
                return ps
        return None

    def trainer_pod_set(self) -> PodSet | None:
        """The first PodSet with ancestor ``trainer``."""
        return self.pod_set_by_ancestor("trainer")

    def trainer_container(self) -> Obj | None:
        """Container ``node`` of the trainer PodSet (upstream's "trainer container")."""
        ps = self.trainer_pod_set()
        return ps.container("node") if ps is not None else None

    def iter_replicated_jobs(self) -> Iterator[Obj]:
        """The replicatedJobs of ``jobset_spec`` (dict entries only)."""
        jobs = self.jobset_spec.get("replicatedJobs")
        if isinstance(jobs, list):
            for job in jobs:
                if isinstance(job, dict):
                    yield job

    def trainer_resources(self) -> Mapping[str, Any]:
        """Resources used for GPU/CPU arithmetic (trainer v2.3.0 pkg/runtime/runtime.go).

        ``spec.trainer.resourcesPerNode`` when set, else the ``node`` container resources of the
        first replicatedJob named ``node`` or with the trainer ancestor. A replacement, not a
        merge.
        """
        if self.trainer is not None and isinstance(self.trainer.get("resourcesPerNode"), dict):
            return self.trainer["resourcesPerNode"]
        for job in self.iter_replicated_jobs():
            tmpl = obj_at(job, "template")
            labels = obj_at(tmpl, "metadata", "labels")
            if job.get("name") == "node" or labels.get(ANCESTOR_LABEL) == "trainer":
                pod_spec = obj_at(tmpl, "spec", "template").get("spec")
                c = find_container(pod_spec, "node")
                if c is not None and isinstance(c.get("resources"), dict):
                    found: Obj = c["resources"]
                    return found
        return {}
