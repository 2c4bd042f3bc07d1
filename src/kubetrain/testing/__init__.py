"""Fluent builders for tests: state only what matters.

>>> job = make_trainjob("job").trainer(num_nodes=2).obj()
>>> rt = make_runtime("torch-distributed").torch().job("node", ancestor="trainer").obj()

Every ``obj()`` returns a fresh dict (mutating it never affects the builder).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.runtime.podspec import tree_copy

__all__ = ["RuntimeBuilder", "TrainJobBuilder", "make_runtime", "make_trainjob"]

Obj = dict[str, Any]


def _env(env: Mapping[str, str] | Sequence[Obj] | None) -> list[Obj]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [{"name": k, "value": v} for k, v in env.items()]
    return [dict(e) for e in env]


class TrainJobBuilder:
    """A TrainJob under construction (``trainer.kubeflow.org/v1alpha1``)."""

    def __init__(self, name: str, namespace: str | None = "default") -> None:
        meta: Obj = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        self._obj: Obj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": meta,
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }

    @property
    def _spec(self) -> Obj:
        spec: Obj = self._obj["spec"]
        return spec

    def runtime(
        self, name: str, *, kind: str | None = None, api_group: str | None = None
    ) -> TrainJobBuilder:
        """``spec.runtimeRef`` (kind/apiGroup left to the CRD defaults unless given)."""
        ref: Obj = {"name": name}
        if api_group is not None:
            ref["apiGroup"] = api_group
        if kind is not None:
            ref["kind"] = kind
        self._spec["runtimeRef"] = ref
        return self

    def trainer(
        self,
        *,
        num_nodes: int | None = None,
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | Sequence[Obj] | None = None,
        resources_per_node: Obj | None = None,
        num_proc_per_node: int | None = None,
    ) -> TrainJobBuilder:
        """Set fields of ``spec.trainer`` (creating it, even empty)."""
        t: Obj = self._spec.setdefault("trainer", {})
        if image is not None:
            t["image"] = image
        if command is not None:
            t["command"] = list(command)
        if args is not None:
            t["args"] = list(args)
        if env is not None:
            t["env"] = _env(env)
        if num_nodes is not None:
            t["numNodes"] = num_nodes
        if resources_per_node is not None:
            t["resourcesPerNode"] = tree_copy(resources_per_node)
        if num_proc_per_node is not None:
            t["numProcPerNode"] = num_proc_per_node
        return self

    def dataset(
        self,
        storage_uri: str | None = None,
        *,
        env: Mapping[str, str] | Sequence[Obj] | None = None,
        secret: str | None = None,
    ) -> TrainJobBuilder:
        """``spec.initializer.dataset``."""
        return self._initializer("dataset", storage_uri, env, secret)

    def model(
        self,
        storage_uri: str | None = None,
        *,
        env: Mapping[str, str] | Sequence[Obj] | None = None,
        secret: str | None = None,
    ) -> TrainJobBuilder:
        """``spec.initializer.model``."""
        return self._initializer("model", storage_uri, env, secret)

    def _initializer(
        self,
        key: str,
        uri: str | None,
        env: Mapping[str, str] | Sequence[Obj] | None,
        secret: str | None,
    ) -> TrainJobBuilder:
        src: Obj = {}
        if uri is not None:
            src["storageUri"] = uri
        if env is not None:
            src["env"] = _env(env)
        if secret is not None:
            src["secretRef"] = {"name": secret}
        self._spec.setdefault("initializer", {})[key] = src
        return self

    def patch(
        self, manager: str, spec: Obj | None = None, *, metadata: Obj | None = None
    ) -> TrainJobBuilder:
        """Append a runtime patch; ``spec`` is the JobSet spec patch (``template.spec``)."""
        template: Obj = {}
        if metadata is not None:
            template["metadata"] = tree_copy(metadata)
        if spec is not None:
            template["spec"] = tree_copy(spec)
        self._spec.setdefault("runtimePatches", []).append(
            {"manager": manager, "trainingRuntimeSpec": {"template": template}}
        )
        return self

    def pod_patch(self, manager: str, job: str, pod_spec: Obj) -> TrainJobBuilder:
        """A runtime patch of one replicatedJob's pod spec (the common case)."""
        return self.patch(
            manager,
            {
                "replicatedJobs": [
                    {"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}
                ]
            },
        )

    def suspend(self, value: bool = True) -> TrainJobBuilder:
        """``spec.suspend``."""
        self._spec["suspend"] = value
        return self

    def deadline(self, seconds: int) -> TrainJobBuilder:
        """``spec.activeDeadlineSeconds``."""
        self._spec["activeDeadlineSeconds"] = seconds
        return self

    def managed_by(self, value: str) -> TrainJobBuilder:
        """``spec.managedBy``."""
        self._spec["managedBy"] = value
        return self

    def uid(self, uid: str) -> TrainJobBuilder:
        """``metadata.uid``."""
        self._obj["metadata"]["uid"] = uid
        return self

    def created(self, timestamp: str) -> TrainJobBuilder:
        """``metadata.creationTimestamp`` (RFC 3339)."""
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def label(self, key: str, value: str) -> TrainJobBuilder:
        """A ``metadata.labels`` entry."""
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def conditions(self, *conditions: Obj) -> TrainJobBuilder:
        """``status.conditions``."""
        self._obj.setdefault("status", {})["conditions"] = [dict(c) for c in conditions]
        return self

    def set(self, path: str, value: Any) -> TrainJobBuilder:
        """Anything else: ``set("spec.trainer.numNodes", 0)`` (dotted path, dicts created)."""
        node = self._obj
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
        return self

    def obj(self) -> Obj:
        """A fresh copy of the TrainJob."""
        out: Obj = tree_copy(self._obj)
        return out


class RuntimeBuilder:
    """A ClusterTrainingRuntime (or TrainingRuntime) under construction."""

    def __init__(
        self, name: str, *, kind: str = "ClusterTrainingRuntime", namespace: str | None = None
    ) -> None:
        meta: Obj = {"name": name}
        if kind == "TrainingRuntime":
            meta["namespace"] = namespace or "default"
        self._obj: Obj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": kind,
            "metadata": meta,
            "spec": {"template": {"spec": {"replicatedJobs": []}}},
        }

    @property
    def _spec(self) -> Obj:
        spec: Obj = self._obj["spec"]
        return spec

    def label(self, key: str, value: str) -> RuntimeBuilder:
        """A ``metadata.labels`` entry (e.g. the framework label)."""
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def framework(self, name: str) -> RuntimeBuilder:
        """``trainer.kubeflow.org/framework``."""
        return self.label("trainer.kubeflow.org/framework", name)

    def num_nodes(self, n: int) -> RuntimeBuilder:
        """``spec.mlPolicy.numNodes``."""
        self._spec.setdefault("mlPolicy", {})["numNodes"] = n
        return self

    def policy(self, kind: str, value: Obj | None = None) -> RuntimeBuilder:
        """``spec.mlPolicy.<kind>`` (torch, mpi, jax, xgboost, flux)."""
        self._spec.setdefault("mlPolicy", {})[kind] = tree_copy(value or {})
        return self

    def torch(self, **policy: Any) -> RuntimeBuilder:
        """``mlPolicy.torch`` (e.g. ``envInjection={...}``)."""
        return self.policy("torch", policy)

    def mpi(self, **policy: Any) -> RuntimeBuilder:
        """``mlPolicy.mpi`` (camelCase keys as on the wire)."""
        return self.policy("mpi", policy)

    def jax(self) -> RuntimeBuilder:
        """``mlPolicy.jax: {}``."""
        return self.policy("jax")

    def xgboost(self) -> RuntimeBuilder:
        """``mlPolicy.xgboost: {}``."""
        return self.policy("xgboost")

    def flux(self, **policy: Any) -> RuntimeBuilder:
        """``mlPolicy.flux``."""
        return self.policy("flux", policy)

    def pod_group(self, kind: str, value: Obj | None = None) -> RuntimeBuilder:
        """``spec.podGroupPolicy.<kind>`` (coscheduling, volcano)."""
        self._spec["podGroupPolicy"] = {kind: tree_copy(value or {})}
        return self

    def template_metadata(
        self, *, labels: Obj | None = None, annotations: Obj | None = None
    ) -> RuntimeBuilder:
        """``spec.template.metadata`` (copied onto the JobSet)."""
        meta: Obj = self._spec["template"].setdefault("metadata", {})
        if labels is not None:
            meta["labels"] = dict(labels)
        if annotations is not None:
            meta["annotations"] = dict(annotations)
        return self

    def jobset(self, **fields: Any) -> RuntimeBuilder:
        """Extra JobSet spec fields (``network=...``, ``successPolicy=...``)."""
        self._spec["template"]["spec"].update(tree_copy(fields))
        return self

    def job(
        self,
        name: str,
        *,
        ancestor: str | None = None,
        image: str = "busybox",
        container: str | None = None,
        containers: Sequence[Obj] | None = None,
        init_containers: Sequence[Obj] | None = None,
        env: Mapping[str, str] | Sequence[Obj] | None = None,
        command: Sequence[str] | None = None,
        resources: Obj | None = None,
        volume_mounts: Sequence[Obj] | None = None,
        volumes: Sequence[Obj] | None = None,
        replicas: int | None = None,
        parallelism: int | None = None,
        depends_on: Sequence[Obj] | None = None,
    ) -> RuntimeBuilder:
        """Append a replicatedJob; by default one container named after the ancestor's rule
        (``node`` for ``trainer``, else the job name)."""
        if containers is None:
            cname = container or ("node" if ancestor == "trainer" or ancestor is None else ancestor)
            c: Obj = {"name": cname, "image": image}
            if command is not None:
                c["command"] = list(command)
            if env is not None:
                c["env"] = _env(env)
            if resources is not None:
                c["resources"] = tree_copy(resources)
            if volume_mounts is not None:
                c["volumeMounts"] = tree_copy(list(volume_mounts))
            containers = [c]
        pod: Obj = {}
        if init_containers is not None:
            pod["initContainers"] = tree_copy(list(init_containers))
        pod["containers"] = tree_copy(list(containers))
        if volumes is not None:
            pod["volumes"] = tree_copy(list(volumes))
        job_spec: Obj = {}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        job_spec["template"] = {"spec": pod}
        template: Obj = {}
        if ancestor is not None:
            template["metadata"] = {
                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}
            }
        template["spec"] = job_spec
        rjob: Obj = {"name": name}
        if replicas is not None:
            rjob["replicas"] = replicas
        if depends_on is not None:
            rjob["dependsOn"] = tree_copy(list(depends_on))
        rjob["template"] = template
        self._spec["template"]["spec"]["replicatedJobs"].append(rjob)
        return self

    def obj(self) -> Obj:
        """A fresh copy of the runtime."""
        out: Obj = tree_copy(self._obj)
        return out


def make_trainjob(name: str = "job", namespace: str | None = "default") -> TrainJobBuilder:
    """A TrainJob named ``name`` referencing ``torch-distributed`` until told otherwise."""
    return TrainJobBuilder(name, namespace)


def make_runtime(
    name: str = "torch-distributed",
    *,
    kind: str = "ClusterTrainingRuntime",
    namespace: str | None = None,
) -> RuntimeBuilder:
    """An empty runtime: add a policy and jobs."""
    return RuntimeBuilder(name, kind=kind, namespace=namespace)
