"""``TrainerClient``: the official Kubeflow SDK's surface over kubetrain's client.

The local control plane is the default backend and a kubeconfig context the other; both are the
same Kubernetes API, so every method is written once. Semantics follow the official SDK's
Kubernetes backend, with its inconsistencies fixed: ``func_args`` are keyword arguments,
``wait_for_job_status`` raises as soon as a job fails, ``get_job_logs(follow=True)`` streams.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kubetrain.api import labels as L
from kubetrain.api.access import dicts, obj_at
from kubetrain.client import resources as R
from kubetrain.client import types as T
from kubetrain.client.connection import connect
from kubetrain.client.errors import NotFoundError
from kubetrain.client.funccmd import function_command
from kubetrain.client.jobs import JobClient, event_time_key
from kubetrain.client.view import JobView, parse_time

__all__ = ["TrainerClient"]

DEFAULT_RUNTIME = "torch-distributed"
STATUSES = frozenset({"Created", "Running", "Suspended", "Complete", "Failed"})


def generated_name() -> str:
    """A new object's name in the official SDK's shape: a letter, then 11 hex digits."""
    return "abcdefghijklmnopqrstuvwxyz"[uuid.uuid4().int % 26] + uuid.uuid4().hex[:11]


def _resources(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """SDK-style resource keys (``gpu``, ``storage``) to Kubernetes names; requests == limits."""
    if not values:
        return None
    out: dict[str, Any] = {}
    for key, value in values.items():
        low = key.lower()
        if low == "gpu":
            name = "nvidia.com/gpu"
        elif low.startswith("mig-"):
            name = f"nvidia.com/{low}"
        elif low == "storage":
            name = "ephemeral-storage"
        elif low in ("cpu", "memory", "ephemeral-storage"):
            name = low
        else:
            name = key
        out[name] = value
    return {"requests": dict(out), "limits": dict(out)}


def _node_container(runtime: dict[str, Any]) -> dict[str, Any]:
    for rjob in dicts(obj_at(runtime, "spec", "template", "spec").get("replicatedJobs")):
        if L.ANCESTOR_LABEL not in obj_at(rjob, "template", "metadata", "labels"):
            continue
        pod = obj_at(rjob, "template", "spec", "template", "spec")
        for container in dicts(pod.get("containers")):
            if container.get("name") == "node":
                return dict(container)
    return {}


def _device(container: dict[str, Any]) -> tuple[str, str]:
    limits = obj_at(container, "resources", "limits")
    for key, device in (("nvidia.com/gpu", "gpu"), ("google.com/tpu", "tpu"), ("cpu", "cpu")):
        if key in limits:
            return device, str(limits[key])
    return "Unknown", "Unknown"


class TrainerClient:
    """Train, inspect and clean up TrainJobs; local engine by default, a cluster via kubeconfig."""

    def __init__(
        self, backend_config: T.LocalBackendConfig | T.KubernetesBackendConfig | None = None
    ) -> None:
        config = backend_config or T.LocalBackendConfig()
        if isinstance(config, T.KubernetesBackendConfig):
            conn = connect(
                kubeconfig=config.config_file,
                context=config.context,
                namespace=config.namespace,
            )
        else:
            conn = connect(namespace=config.namespace, home=config.home)
        self._jobs = JobClient(conn)

    @property
    def namespace(self) -> str:
        return self._jobs.namespace

    def close(self) -> None:
        self._jobs.close()

    def __enter__(self) -> TrainerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runtimes ----------------------------------------------------------------------------

    def _runtime_obj(self, name: str) -> dict[str, Any]:
        found = self._jobs.find(R.TRAINING_RUNTIME, name) or self._jobs.find(
            R.CLUSTER_TRAINING_RUNTIME, name
        )
        if found is None:
            raise NotFoundError(
                f'runtime "{name}" not found (checked TrainingRuntime and ClusterTrainingRuntime)'
            )
        return found

    @staticmethod
    def _to_runtime(obj: dict[str, Any]) -> T.Runtime:
        labels = obj_at(obj, "metadata", "labels")
        framework = str(labels.get(L.FRAMEWORK_LABEL, ""))
        ml = obj_at(obj, "spec", "mlPolicy")
        container = _node_container(obj)
        device, count = _device(container)
        trainer_type = (
            T.TrainerType.BUILTIN_TRAINER
            if framework == "torchtune"
            else T.TrainerType.CUSTOM_TRAINER
        )
        return T.Runtime(
            name=str(obj["metadata"]["name"]),
            kind=T.RuntimeKind(obj.get("kind", R.CLUSTER_TRAINING_RUNTIME.kind)),
            trainer=T.RuntimeTrainer(
                trainer_type=trainer_type,
                framework=framework,
                image=container.get("image"),
                num_nodes=int(ml.get("numNodes") or 1),
                device=device,
                device_count=count,
                command=tuple(container.get("command") or ()),
            ),
        )

    def list_runtimes(self) -> list[T.Runtime]:
        """Cluster and namespaced runtimes; a namespaced one hides a cluster one of its name."""
        by_name = {o["metadata"]["name"]: o for o in self._jobs.objects(R.CLUSTER_TRAINING_RUNTIME)}
        # A cluster may not serve namespaced runtimes at all (404): cluster ones still count.
        with contextlib.suppress(NotFoundError):
            namespaced = self._jobs.objects(R.TRAINING_RUNTIME)
            by_name.update({o["metadata"]["name"]: o for o in namespaced})
        return [self._to_runtime(o) for _, o in sorted(by_name.items())]

    def get_runtime(self, name: str) -> T.Runtime:
        return self._to_runtime(self._runtime_obj(name))

    # --- training ----------------------------------------------------------------------------

    def train(
        self,
        runtime: str | T.Runtime | None = None,
        initializer: T.Initializer | None = None,
        trainer: T.CustomTrainer | T.CustomTrainerContainer | T.BuiltinTrainer | None = None,
        options: Iterable[T.Option] | None = None,
    ) -> str:
        """Create a TrainJob and return its name (random unless ``Name(...)`` is given)."""
        job = self.trainjob_body(runtime, initializer, trainer, options)
        return self._jobs.apply_one(job).name

    def trainjob_body(
        self,
        runtime: str | T.Runtime | None = None,
        initializer: T.Initializer | None = None,
        trainer: T.CustomTrainer | T.CustomTrainerContainer | T.BuiltinTrainer | None = None,
        options: Iterable[T.Option] | None = None,
    ) -> dict[str, Any]:
        """The TrainJob ``train`` would create (the OptimizerClient's trial template too)."""
        name_of = runtime.name if isinstance(runtime, T.Runtime) else runtime or DEFAULT_RUNTIME
        rt = self._runtime_obj(name_of)
        spec_trainer: dict[str, Any] = {}
        if isinstance(trainer, T.CustomTrainer):
            spec_trainer["command"] = function_command(
                trainer.func,
                trainer.func_args,
                obj_at(rt, "spec", "mlPolicy"),
                packages=trainer.packages_to_install,
                index_urls=trainer.pip_index_urls,
            )
        if isinstance(trainer, T.BuiltinTrainer):
            framework = obj_at(rt, "metadata", "labels").get(L.FRAMEWORK_LABEL)
            if framework != "torchtune":
                raise ValueError(
                    f"BuiltinTrainer needs a torchtune runtime; {name_of} is {framework}"
                )
            spec_trainer["command"] = ["tune", "run"]
            spec_trainer["args"] = trainer.config.args()
        size = trainer.config if isinstance(trainer, T.BuiltinTrainer) else trainer
        if size is not None:
            if size.num_nodes is not None:
                spec_trainer["numNodes"] = size.num_nodes
            resources = _resources(size.resources_per_node)
            if resources:
                spec_trainer["resourcesPerNode"] = resources
        if isinstance(trainer, T.CustomTrainer | T.CustomTrainerContainer):
            if trainer.image:
                spec_trainer["image"] = trainer.image
            if trainer.env:
                spec_trainer["env"] = [{"name": k, "value": str(v)} for k, v in trainer.env.items()]
        spec: dict[str, Any] = {"runtimeRef": {"name": name_of, "kind": rt.get("kind")}}
        if initializer is not None:
            init = {
                k: v.spec()
                for k, v in (("dataset", initializer.dataset), ("model", initializer.model))
                if v
            }
            if init:
                spec["initializer"] = init
        if spec_trainer:
            spec["trainer"] = spec_trainer
        name = generated_name()
        job = {
            "apiVersion": R.TRAINJOB.api_version,
            "kind": R.TRAINJOB.kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        for option in options or ():
            option.apply(job)
        return job

    # --- jobs --------------------------------------------------------------------------------

    def _to_trainjob(self, view: JobView, runtimes: dict[str, T.Runtime | None]) -> T.TrainJob:
        if view.runtime_name not in runtimes:
            try:
                runtimes[view.runtime_name] = self.get_runtime(view.runtime_name)
            except NotFoundError:
                runtimes[view.runtime_name] = None  # unlike the official SDK, still show the job
        runtime = runtimes[view.runtime_name]
        device = runtime.trainer.device if runtime else "Unknown"
        count = runtime.trainer.device_count if runtime else "Unknown"
        steps = [
            T.Step(
                name=s.name,
                status=s.phase,
                pod_name=s.pod,
                device=device if s.name.startswith("node") else "Unknown",
                device_count=count if s.name.startswith("node") else "Unknown",
            )
            for s in view.steps
        ]
        return T.TrainJob(
            name=view.name,
            runtime=runtime,
            steps=steps,
            num_nodes=view.num_nodes or 1,
            creation_timestamp=parse_time(view.created),
            status=view.state,
        )

    def list_jobs(self, runtime: T.Runtime | None = None) -> list[T.TrainJob]:
        cache: dict[str, T.Runtime | None] = {}
        views = self._jobs.jobs()
        if runtime is not None:
            views = [v for v in views if v.runtime_name == runtime.name]
        return [self._to_trainjob(v, cache) for v in views]

    def get_job(self, name: str) -> T.TrainJob:
        return self._to_trainjob(self._jobs.job(name), {})

    def get_job_logs(
        self, name: str, step: str = "node-0", follow: bool = False, tail: int | None = None
    ) -> Iterator[str]:
        """Lines of one step; a step that has not started yields nothing unless following."""
        from kubetrain.client.logs import follow_step

        if follow:
            yield from follow_step(self._jobs, name, step, tail=tail)
            return
        view = self._jobs.job(name)
        found = next((s for s in view.steps if s.name == step), None)
        if found is None or found.phase == "Pending":
            return
        yield from self._jobs.logs(found.pod, found.container, tail=tail)

    def get_job_events(self, name: str) -> list[T.Event]:
        self._jobs.job(name)  # a missing job is an error, not an empty list
        return [
            T.Event(
                involved_object_kind=str(obj_at(e, "involvedObject").get("kind", "")),
                involved_object_name=str(obj_at(e, "involvedObject").get("name", "")),
                message=str(e.get("message") or ""),
                reason=str(e.get("reason") or ""),
                event_time=parse_time(event_time_key(e)),
            )
            for e in self._jobs.events(name)
        ]

    def wait_for_job_status(
        self,
        name: str,
        status: set[str] | frozenset[str] = frozenset({"Complete"}),
        timeout: float = 600,
        polling_interval: float = 2,
        callbacks: list[Callable[[T.TrainJob], None]] | None = None,
    ) -> T.TrainJob:
        """Poll until the job reaches one of ``status``; RuntimeError at once if it fails."""
        unknown = set(status) - STATUSES
        if unknown:
            raise ValueError(
                f"unknown status {sorted(unknown)}; expected some of {sorted(STATUSES)}"
            )
        if timeout <= 0 or polling_interval <= 0 or polling_interval > timeout:
            raise ValueError("need timeout > 0 and 0 < polling_interval <= timeout")
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(name)
            for callback in callbacks or ():
                callback(job)
            if job.status in status:
                return job
            if job.status == "Failed":
                message = self._jobs.job(name).message
                raise RuntimeError(
                    f"TrainJob {name} is Failed: {message}"
                    if message
                    else f"TrainJob {name} is Failed"
                )
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"TrainJob {name} did not reach {sorted(status)} within {timeout:g}s (now {job.status})"
                )
            time.sleep(min(polling_interval, max(0.0, deadline - time.monotonic())))

    def delete_job(self, name: str, wait: bool = True, timeout: float = 60.0) -> None:
        """Delete a TrainJob; by default return once its pods (processes) are gone."""
        self._jobs.delete_job(name, wait=wait, timeout=timeout)
