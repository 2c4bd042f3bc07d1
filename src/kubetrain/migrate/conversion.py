"""A v1 job -> a TrainJob (+ a generated TrainingRuntime) and a report (reference §5).

Target: a default ClusterTrainingRuntime (PyTorchJob -> torch-distributed, JAXJob ->
jax-distributed, XGBoostJob -> xgboost-distributed) when everything in the v1 pod template fits
``spec.trainer`` and ``runtimePatches``; else a TrainingRuntime ``<J>-runtime`` that carries the v1
pod templates as they are (main container renamed ``node``). Every v1 field that does not arrive
unchanged gets a report item; every output is admitted by kubetrain's own admission
(``kubetrain.migrate.admit``) before it is returned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_dict, list_at
from kubetrain.api.errors import FieldError
from kubetrain.api.labels import ANCESTOR_LABEL, FRAMEWORK_LABEL, TRAINER_API_VERSION, TRAINER_GROUP
from kubetrain.migrate import shim
from kubetrain.migrate.kinds import Kind, Replica, V1Job, read_v1_job
from kubetrain.migrate.report import Category, MigrateError, ReportItem
from kubetrain.runtime.plugins.mpi import RESERVED_ENV as MPI_RESERVED
from kubetrain.runtime.plugins.torch import RESERVED_ENV as TORCH_RESERVED
from kubetrain.runtime.plugins.xgboost import RESERVED_ENV as XGBOOST_RESERVED
from kubetrain.runtime.podspec import tree_copy

__all__ = ["MANAGER", "Conversion", "convert"]

Obj = dict[str, Any]

MANAGER = "kubetrain.dev/migrate"
RESERVED_ENV = TORCH_RESERVED | XGBOOST_RESERVED | MPI_RESERVED
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Pod-spec fields a RuntimePatch may carry (reference §4); anything else needs a generated runtime.
_PATCHABLE_POD = (
    "serviceAccountName",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "affinity",
    "tolerations",
    "schedulingGates",
    "terminationGracePeriodSeconds",
)
_TRAINER_FIELDS = ("name", "image", "command", "args", "env", "resources")
_PATCHABLE_CONTAINER = ("volumeMounts", "securityContext")
_DROPPABLE_CONTAINER = ("imagePullPolicy", "ports")
_MPI_SSH_DEFAULT = "/root/.ssh"


@dataclass
class Conversion:
    """The objects to apply, in order (a generated runtime before its TrainJob), and the report."""

    source_kind: str
    name: str
    runtime_name: str
    generated_runtime: bool
    objects: list[Obj]
    report: list[ReportItem] = field(default_factory=list)

    @property
    def trainjob(self) -> Obj:
        return self.objects[-1]

    @property
    def runtime(self) -> Obj | None:
        return self.objects[0] if self.generated_runtime else None

    def report_dict(self) -> Obj:
        return {
            "source": {"kind": self.source_kind, "name": self.name},
            "runtime": {
                "kind": "TrainingRuntime" if self.generated_runtime else "ClusterTrainingRuntime",
                "name": self.runtime_name,
                "generated": self.generated_runtime,
            },
            "items": [i.as_dict() for i in self.report],
        }


def convert(obj: Any, *, env_shim: bool = True, source: str = "") -> Conversion:
    """Convert one v1 job; MigrateError (with every problem) where v2 cannot express it."""
    job = read_v1_job(obj, source=source)
    conversion = _Converter(job, env_shim=env_shim, source=source).run()
    from kubetrain.migrate.admit import admission_errors

    errors = admission_errors(conversion.objects)
    if errors:
        raise MigrateError(
            f"{source or 'input'}: {job.kind.kind} {job.name}: the converted objects are refused by"
            " Trainer v2.3 admission",
            errors,
        )
    return conversion


def _flat_diff(a: Any, b: Any, path: str) -> list[str]:
    """Paths where two JSON trees differ (lists compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                out.extend(_flat_diff(a.get(k), b.get(k), f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in _flat_diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path]


class _Converter:
    def __init__(self, job: V1Job, *, env_shim: bool, source: str = "") -> None:
        self.job = job
        self.what = f"{source or 'input'}: {job.kind.kind} {job.name}"
        self.kind: Kind = job.kind
        self.env_shim = env_shim
        self.report: list[ReportItem] = []
        self.tj = job.name
        self.trainjob: Obj = {}
        self.jobset_extra: Obj = {}  # JobSet spec fields a generated runtime carries
        self.backoff_limit: int | None = None

    def note(self, path: str, category: Category, why: str, action: str) -> None:
        self.report.append(ReportItem(path, category, why, action))

    # --- the whole job ------------------------------------------------------------------------

    def run(self) -> Conversion:
        kind = self.kind
        meta = as_dict(self.job.obj.get("metadata"))
        tj_meta: Obj = {"name": self.tj}
        if self.job.namespace:
            tj_meta["namespace"] = self.job.namespace
        if meta.get("labels"):
            tj_meta["labels"] = dict(meta["labels"])
        annotations = {
            k: v for k, v in as_dict(meta.get("annotations")).items() if k != _LAST_APPLIED
        }
        if annotations:
            tj_meta["annotations"] = annotations
        self.trainjob = {
            "apiVersion": TRAINER_API_VERSION,
            "kind": "TrainJob",
            "metadata": tj_meta,
            "spec": {},
        }
        self._run_policy()
        self._kind_fields()
        misfits = self._misfits()
        if kind.default_runtime is not None and not misfits:
            return self._to_default_runtime()
        return self._to_generated_runtime(misfits)

    def _spec(self) -> Obj:
        spec: Obj = self.trainjob["spec"]
        return spec

    def _run_policy(self) -> None:
        spec = self.job.spec
        policy = as_dict(spec.get("runPolicy"))
        if self.kind.kind == "MPIJob" and "cleanPodPolicy" in spec:
            policy = {"cleanPodPolicy": spec["cleanPodPolicy"], **policy}
        for key, value in policy.items():
            path = f"spec.runPolicy.{key}"
            if key == "suspend":
                if value:
                    self._spec()["suspend"] = True
            elif key == "activeDeadlineSeconds":
                self._spec()["activeDeadlineSeconds"] = value
            elif key == "managedBy":
                if value == "kueue.x-k8s.io/multikueue":
                    self._spec()["managedBy"] = value
                    self.note(
                        path,
                        Category.MANUAL,
                        "MultiKueue runs the TrainJob on a worker cluster",
                        "apply any generated TrainingRuntime on every worker cluster too",
                    )
            elif key == "ttlSecondsAfterFinished":
                self.jobset_extra["ttlSecondsAfterFinished"] = value
                self.note(
                    path,
                    Category.APPROXIMATED,
                    "v2 has no TrainJob TTL: the generated runtime's JobSet TTL deletes the"
                    " JobSet and its pods, the TrainJob object stays",
                    "delete finished TrainJobs yourself if you relied on the TTL",
                )
            elif key == "backoffLimit":
                self.backoff_limit = int(value)
                self.note(
                    path,
                    Category.APPROXIMATED,
                    "v1 counted restarts over the whole job; v2 limits each Job of the JobSet",
                    "check the backoffLimit in the generated runtime",
                )
            elif key == "cleanPodPolicy":
                if value != "Running":
                    self.note(
                        path,
                        Category.DROPPED,
                        f"cleanPodPolicy {value} has no v2 equivalent: when a JobSet ends its"
                        " still-running pods are deleted (v1 'Running')",
                        "nothing to do unless you relied on keeping or deleting finished pods",
                    )
            elif key == "schedulingPolicy":
                self._scheduling_policy(as_dict(value))
            else:
                self.note(path, Category.DROPPED, "unknown runPolicy field", "remove it")

    def _scheduling_policy(self, policy: Obj) -> None:
        base = "spec.runPolicy.schedulingPolicy"
        actions = {
            "queue": (
                Category.MANUAL,
                "v2 has no per-job queue field",
                "Kueue: label the TrainJob kueue.x-k8s.io/queue-name; Volcano: a runtime with"
                " podGroupPolicy.volcano and the scheduling.volcano.sh/queue-name annotation",
            ),
            "minAvailable": (
                Category.DROPPED,
                "a v2 PodGroup always gangs every pod",
                "nothing to do unless you relied on a partial gang",
            ),
            "minResources": (
                Category.DROPPED,
                "a v2 PodGroup sums the pods' resources",
                "nothing to do",
            ),
            "priorityClass": (
                Category.MANUAL,
                "v2 takes the priority from the pods",
                "set priorityClassName in a TrainingRuntime's pod template",
            ),
            "scheduleTimeoutSeconds": (
                Category.MANUAL,
                "v2 sets it on the runtime",
                "set podGroupPolicy.coscheduling.scheduleTimeoutSeconds in a TrainingRuntime",
            ),
        }
        for key in policy:
            category, why, action = actions.get(
                key, (Category.DROPPED, "unknown schedulingPolicy field", "remove it")
            )
            self.note(f"{base}.{key}", category, why, action)

    def _kind_fields(self) -> None:
        """Spec fields beside runPolicy and the replica specs: handled per kind or reported."""
        spec = self.job.spec
        handled = {"runPolicy", self.kind.specs_key}
        k = self.kind.kind
        if k == "PyTorchJob":
            handled |= {"nprocPerNode", "elasticPolicy"}
            elastic = as_dict(spec.get("elasticPolicy"))
            for key in elastic:
                if key == "nProcPerNode":
                    continue
                self.note(
                    f"spec.elasticPolicy.{key}",
                    Category.APPROXIMATED
                    if key
                    in ("rdzvBackend", "rdzvPort", "rdzvHost", "rdzvId", "rdzvConf", "standalone")
                    else Category.DROPPED,
                    "v2 runs a fixed-size gang (elastic training was removed from v2 in v2.2)",
                    "the job runs with its current Worker replicas as numNodes",
                )
        elif k == "TFJob":
            handled |= {"successPolicy", "enableDynamicWorker"}
            if spec.get("enableDynamicWorker"):
                self.note(
                    "spec.enableDynamicWorker",
                    Category.DROPPED,
                    "v2 has no dynamic workers: the TF_CONFIG cluster is fixed",
                    "regenerate the runtime when the worker count changes",
                )
        elif k == "PaddleJob":
            handled |= {"elasticPolicy"}
            for key in as_dict(spec.get("elasticPolicy")):
                self.note(
                    f"spec.elasticPolicy.{key}",
                    Category.DROPPED,
                    "no elastic training in v2 (v1.9 did not act on it either)",
                    "none",
                )
        elif k == "MPIJob":
            handled |= {
                "slotsPerWorker",
                "runLauncherAsWorker",
                "sshAuthMountPath",
                "launcherCreationPolicy",
                "mpiImplementation",
                "mainContainer",
                "cleanPodPolicy",
            }
            impl = spec.get("mpiImplementation", "OpenMPI")
            if impl != "OpenMPI":
                raise MigrateError(
                    self.what,
                    [
                        FieldError(
                            "spec.mpiImplementation",
                            f"{impl} cannot be converted: Trainer v2.3 runs OpenMPI only"
                            " (its CRD allows OpenMPI); rebuild the image on OpenMPI",
                            "NotSupported",
                        )
                    ],
                )
        for key in spec:
            if key not in handled:
                self.note(
                    f"spec.{key}", Category.DROPPED, f"not a {k} field v2 can express", "remove it"
                )

    # --- fitting a default runtime -----------------------------------------------------------

    def _misfits(self) -> list[str]:
        """Why the job needs a generated runtime (empty: a default runtime fits)."""
        why: list[str] = []
        if self.kind.default_runtime is None:
            return [f"Trainer v2.3 has no default runtime for {self.kind.kind}"]
        if "ttlSecondsAfterFinished" in self.jobset_extra or self.backoff_limit is not None:
            why.append("runPolicy TTL/backoffLimit live on a runtime")
        for r in self.job.replicas.values():
            p = f"{r.path(self.kind)}.template.spec"
            if r.restart_policy in ("Never", "ExitCode"):
                why.append(f"{r.path(self.kind)}.restartPolicy {r.restart_policy}")
            for key in r.pod_spec:
                if key not in (*_PATCHABLE_POD, "containers"):
                    why.append(f"{p}.{key}")
            for i in range(len(r.pod_spec["containers"])):
                if i != r.main:
                    why.append(f"{p}.containers[{i}] (a sidecar)")
            for key in r.container:
                if key not in (*_TRAINER_FIELDS, *_PATCHABLE_CONTAINER, *_DROPPABLE_CONTAINER):
                    why.append(f"{p}.containers[{r.main}].{key}")
            for port in list_at(r.container, "ports"):
                if as_dict(port).get("name") != self.kind.port_name:
                    why.append(f"{p}.containers[{r.main}].ports")
                    break
        return why

    def _roles_differ(self) -> None:
        """v2 runs one template on every node of a merged role: report every difference."""
        reps = list(self.job.replicas.values())
        base = reps[0]
        for other in reps[1:]:
            for path in _flat_diff(
                base.template, other.template, f"{other.path(self.kind)}.template"
            ):
                self.note(
                    path,
                    Category.APPROXIMATED,
                    f"differs from {base.role}'s; v2 runs {base.role}'s template on every node",
                    "make the roles' templates equal or move the difference into the code",
                )
            if other.restart_policy != base.restart_policy:
                self.note(
                    f"{other.path(self.kind)}.restartPolicy",
                    Category.APPROXIMATED,
                    f"{other.restart_policy} differs from {base.role}'s {base.restart_policy};"
                    " v2 uses one restart policy on every node",
                    "none",
                )

    def _num_nodes(self) -> int:
        return sum(r.replicas for r in self.job.replicas.values())

    def _nproc(self) -> tuple[int | None, int]:
        """(numProcPerNode for the TrainJob, the factor v1 used in WORLD_SIZE)."""
        spec = self.job.spec
        elastic = as_dict(spec.get("elasticPolicy")).get("nProcPerNode")
        if isinstance(elastic, int):
            self.note(
                "spec.elasticPolicy.nProcPerNode",
                Category.APPROXIMATED,
                "deprecated since v1.7",
                "numProcPerNode carries it",
            )
            return elastic, elastic
        value = spec.get("nprocPerNode")
        if value is None or value == "auto":
            return None, 1
        text = str(value)
        if text.isdigit():
            return int(text), int(text)
        if text == "cpu":
            self.note(
                "spec.nprocPerNode",
                Category.APPROXIMATED,
                "v2 'auto' without GPUs starts one process per requested CPU; torchrun 'cpu'"
                " started one per host core",
                "set trainer.numProcPerNode to an integer",
            )
        elif text == "gpu":
            self.note(
                "spec.nprocPerNode",
                Category.APPROXIMATED,
                "v2 'auto' uses the requested GPUs",
                "none when the pod requests GPUs",
            )
        else:
            self.note(
                "spec.nprocPerNode", Category.DROPPED, f"unknown value {text!r}", "set an integer"
            )
        return None, 1

    def _user_env(self, r: Replica) -> list[Obj]:
        """The main container's env minus what v2 reserves and what v1 overwrote (reported)."""
        out = []
        injected = shim.V1_INJECTED.get(self.kind.kind, frozenset())
        for i, e in enumerate(list_at(r.container, "env")):
            name = as_dict(e).get("name")
            path = f"{r.path(self.kind)}.template.spec.containers[{r.main}].env[{i}]"
            if name in RESERVED_ENV:
                self.note(
                    path,
                    Category.DROPPED,
                    f"{name} is reserved: the v2 runtime sets it",
                    "remove it; the runtime's value applies",
                )
            elif name in injected:
                self.note(
                    path,
                    Category.DROPPED,
                    f"the v1 operator replaced {name} with its own value",
                    "remove it" + ("; the env shim sets v1's value" if self.env_shim else ""),
                )
            else:
                out.append(e)
        return out

    def _shim_env(self, num_nodes: int, nproc: int, r: Replica) -> list[Obj]:
        """The v1 env contract for the single ``node`` job (torch, XGBoost, JAX, Paddle)."""
        k, c = self.kind.kind, r.container
        path = f"{r.path(self.kind)}.template.spec.containers[{r.main}]"
        env: list[Obj] = []
        what = ""
        if k == "PyTorchJob":
            if "Master" in self.job.replicas and not shim.launches_torchrun(c):
                env, what = (
                    shim.torch_env(self.tj, num_nodes, nproc),
                    "MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK",
                )
            elif "elasticPolicy" in self.job.spec and shim.needs_rdzv_endpoint(c):
                env = [
                    {"name": "PET_RDZV_ENDPOINT", "value": f"{shim.host(self.tj, 'node', 0)}:29500"}
                ]
                what = "PET_RDZV_ENDPOINT"
        elif k == "XGBoostJob":
            env = shim.xgboost_env(self.tj, num_nodes, r.port(self.kind) or 9999)
            what = "MASTER_*/WORKER_*/WORLD_SIZE/RANK"
        elif k == "JAXJob":
            env, what = shim.jax_env(self.tj, num_nodes), "COORDINATOR_*/NUM_PROCESSES/PROCESS_ID"
        elif k == "PaddleJob":
            env = shim.paddle_env(self.tj, "node", r.port(self.kind) or 36543, num_nodes, None)
            what = "PADDLE_*"
        if not env:
            return []
        if self.env_shim:
            self.note(
                f"{path}.env",
                Category.APPROXIMATED,
                f"v2 does not inject v1's {what}; the env shim sets them with v1's values"
                " for the v2 pods",
                "none; or move the code to the v2 runtime's env and convert with --no-env-shim",
            )
            return env
        self.note(
            f"{path}.env",
            Category.MANUAL,
            f"v2 does not inject v1's {what}; code that reads them breaks",
            "convert with --env-shim, or change the code to read the v2 runtime's env",
        )
        return []

    # --- default runtime ----------------------------------------------------------------------

    def _to_default_runtime(self) -> Conversion:
        kind, job = self.kind, self.job
        self._roles_differ()
        r = next(iter(job.replicas.values()))
        c = r.container
        cpath = f"{r.path(kind)}.template.spec.containers[{r.main}]"
        num_nodes = self._num_nodes()
        nproc, factor = self._nproc() if kind.kind == "PyTorchJob" else (None, 1)
        trainer: Obj = {"image": c["image"]}
        for key in ("command", "args"):
            if key in c:
                trainer[key] = list(c[key])
        env = [*self._user_env(r), *self._shim_env(num_nodes, factor, r)]
        if env:
            trainer["env"] = env
        if c.get("resources"):
            trainer["resourcesPerNode"] = tree_copy(c["resources"])
        trainer["numNodes"] = num_nodes
        if nproc is not None:
            trainer["numProcPerNode"] = nproc
        if "imagePullPolicy" in c:
            self.note(
                f"{cpath}.imagePullPolicy",
                Category.DROPPED,
                "spec.trainer has no imagePullPolicy; the node pulls as Kubernetes defaults"
                " (Always for :latest, else IfNotPresent)",
                "use a TrainingRuntime if the pull policy matters",
            )
        if c.get("ports"):
            self.note(
                f"{cpath}.ports",
                Category.DROPPED,
                f"v2 uses the runtime's port (29500), not {kind.port_name}",
                "none unless the code binds the v1 port itself",
            )
        if r.restart_policy == "Always":
            self.note(
                f"{r.path(kind)}.restartPolicy",
                Category.APPROXIMATED,
                "Jobs cannot restart Always; the node restarts OnFailure",
                "none",
            )
        spec = self._spec()
        spec["runtimeRef"] = {
            "name": kind.default_runtime,
            "apiGroup": TRAINER_GROUP,
            "kind": "ClusterTrainingRuntime",
        }
        spec["trainer"] = trainer
        patch = self._pod_patch(r)
        if patch:
            spec["runtimePatches"] = [{"manager": MANAGER, "trainingRuntimeSpec": patch}]
        # Key order as a reader expects it: runtimeRef, trainer, patches, then runPolicy mappings.
        self.trainjob["spec"] = {
            k: spec[k] for k in ("runtimeRef", "trainer", "runtimePatches") if k in spec
        } | {k: v for k, v in spec.items() if k not in ("runtimeRef", "trainer", "runtimePatches")}
        self._name_lengths(["node"], num_nodes)
        return Conversion(
            kind.kind, self.tj, str(kind.default_runtime), False, [self.trainjob], self.report
        )

    def _pod_patch(self, r: Replica) -> Obj:
        pod: Obj = {}
        meta = as_dict(r.template.get("metadata"))
        pod_meta = {k: dict(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
        if pod_meta:
            pod["metadata"] = pod_meta
        spec = {k: tree_copy(r.pod_spec[k]) for k in _PATCHABLE_POD if k in r.pod_spec}
        container = {k: tree_copy(r.container[k]) for k in _PATCHABLE_CONTAINER if k in r.container}
        if container:
            spec["containers"] = [{"name": "node", **container}]
        if spec:
            pod["spec"] = spec
        if not pod:
            return {}
        return {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod}}}]
                }
            }
        }

    def _name_lengths(self, jobs: list[str], largest: int) -> None:
        for j in jobs:
            pod = f"{self.tj}-{j}-0-{max(largest - 1, 0)}"
            if len(pod) + 6 > 63:
                self.note(
                    "metadata.name",
                    Category.MANUAL,
                    f"pod names like {pod}-xxxxx exceed 63 characters; JobSet refuses the job",
                    "give the TrainJob a shorter name",
                )
                return

    # --- generated runtime --------------------------------------------------------------------

    def _pod_template(self, r: Replica, *, rename: bool) -> Obj:
        """The v1 pod template as a v2 one: main container renamed, reserved env out, restart kept."""
        template: Obj = tree_copy(r.template)
        spec = template.setdefault("spec", {})
        container = spec["containers"][r.main]
        if rename:
            container["name"] = "node"
        env = self._user_env(r)
        if env:
            container["env"] = env
        else:
            container.pop("env", None)
        restart = r.restart_policy
        if restart == "Always":
            self.note(
                f"{r.path(self.kind)}.restartPolicy",
                Category.APPROXIMATED,
                "Jobs cannot restart Always; the pods restart OnFailure",
                "none",
            )
            restart = "OnFailure"
        elif restart == "ExitCode":
            self.note(
                f"{r.path(self.kind)}.restartPolicy",
                Category.APPROXIMATED,
                "ExitCode becomes restartPolicy Never with a podFailurePolicy that fails the"
                " Job on exit codes 1-127 and retries the others within backoffLimit",
                "none",
            )
            restart = "Never"
        spec["restartPolicy"] = restart
        return template

    def _replicated_job(
        self,
        name: str,
        template: Obj,
        *,
        ancestor: bool,
        count: int,
        exit_code: bool,
        backoff: bool = True,
    ) -> Obj:
        job_spec: Obj = {}
        if not ancestor and count != 1:
            job_spec["parallelism"] = count
            job_spec["completions"] = count
        if backoff and self.backoff_limit is not None:
            job_spec["backoffLimit"] = self.backoff_limit
        if exit_code:
            job_spec["podFailurePolicy"] = {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": "node" if ancestor else None,
                            "operator": "In",
                            "values": list(range(1, 128)),
                        },
                    }
                ]
            }
            codes = job_spec["podFailurePolicy"]["rules"][0]["onExitCodes"]
            if codes["containerName"] is None:
                del codes["containerName"]
        job_spec["template"] = template
        rjob: Obj = {"name": name, "template": {"spec": job_spec}}
        if ancestor:
            rjob["template"] = {
                "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                "spec": job_spec,
            }
        return rjob

    def _to_generated_runtime(self, misfits: list[str]) -> Conversion:
        kind = self.kind
        if kind.default_runtime is not None:
            self.note(
                "spec",
                Category.APPROXIMATED,
                f"the pod template does not fit {kind.default_runtime} ({'; '.join(misfits)})",
                f"a TrainingRuntime {self.tj}-runtime reproduces it; apply it before the TrainJob",
            )
        if kind.kind == "MPIJob":
            return self._mpi()
        if kind.kind == "TFJob" or (kind.kind == "PaddleJob" and "Master" in self.job.replicas):
            return self._multi_role()
        return self._single_role()

    def _runtime(self, ml_policy: Obj, jobs: list[Obj], success: list[str] | None) -> Obj:
        js: Obj = {}
        if success:
            js["successPolicy"] = {"operator": "All", "targetReplicatedJobs": success}
        js.update(self.jobset_extra)
        js["replicatedJobs"] = jobs
        meta: Obj = {"name": f"{self.tj}-runtime"}
        if self.job.namespace:
            meta["namespace"] = self.job.namespace
        meta["labels"] = {FRAMEWORK_LABEL: self.kind.framework}
        return {
            "apiVersion": TRAINER_API_VERSION,
            "kind": "TrainingRuntime",
            "metadata": meta,
            "spec": {"mlPolicy": ml_policy, "template": {"spec": js}},
        }

    def _finish(self, runtime: Obj, trainer: Obj) -> Conversion:
        spec = self._spec()
        self.trainjob["spec"] = {
            "runtimeRef": {
                "name": runtime["metadata"]["name"],
                "apiGroup": TRAINER_GROUP,
                "kind": "TrainingRuntime",
            },
            "trainer": trainer,
            **spec,
        }
        jobs = [j["name"] for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]]
        self._name_lengths(jobs, max(r.replicas for r in self.job.replicas.values()))
        return Conversion(
            self.kind.kind,
            self.tj,
            runtime["metadata"]["name"],
            True,
            [runtime, self.trainjob],
            self.report,
        )

    def _single_role(self) -> Conversion:
        """PyTorch, XGBoost, JAX, collective Paddle: every role merged into one ``node`` job."""
        kind = self.kind
        self._roles_differ()
        r = next(iter(self.job.replicas.values()))
        num_nodes = self._num_nodes()
        nproc, factor = self._nproc() if kind.kind == "PyTorchJob" else (None, 1)
        template = self._pod_template(r, rename=True)
        rjob = self._replicated_job(
            "node",
            template,
            ancestor=True,
            count=num_nodes,
            exit_code=r.restart_policy == "ExitCode",
        )
        source = {"PyTorchJob": "torch", "XGBoostJob": "xgboost", "JAXJob": "jax"}.get(kind.kind)
        ml: Obj = {"numNodes": num_nodes, **({source: {}} if source else {})}
        runtime = self._runtime(ml, [rjob], None)
        trainer: Obj = {"numNodes": num_nodes}
        if nproc is not None:
            trainer["numProcPerNode"] = nproc
        env = self._shim_env(num_nodes, factor, r)
        if env:
            trainer["env"] = env
        return self._finish(runtime, trainer)

    def _multi_role(self) -> Conversion:
        """TFJob (and PaddleJob in PS mode): one replicated job per role.

        The workers' job is the trainer job and is named ``node``, as in every default runtime:
        ``trainer.numNodes`` sizes it, and the SDK and ``kubetrain logs``/``run`` find its pods
        as steps ``node-<i>``. The other roles keep their names (``chief``, ``ps``, ...).
        """
        kind, reps = self.kind, self.job.replicas
        ancestor = "Worker" if "Worker" in reps else next(iter(reps))
        jname = {role: "node" if role == ancestor else r.lower for role, r in reps.items()}
        distributed = self.job.total != 1
        cluster = {
            r.lower: [
                f"{shim.host(self.tj, jname[role], i)}:{r.port(kind)}" for i in range(r.replicas)
            ]
            for role, r in reps.items()
        }
        jobs: list[Obj] = []
        for role, r in reps.items():
            template = self._pod_template(r, rename=role == ancestor)
            container = template["spec"]["containers"][r.main]
            extra: list[Obj] = []
            if kind.kind == "TFJob" and distributed:
                extra = shim.tf_env(self.tj, cluster, r.lower)
                contract = "TF_CONFIG"
            elif kind.kind == "PaddleJob":
                num = "PADDLE_SERVER_NUM" if role == "Master" else "PADDLE_TRAINER_NUM"
                extra = shim.paddle_env(
                    self.tj,
                    jname["Master"],
                    reps["Master"].port(kind) or 36543,
                    self.job.total,
                    num,
                )
                contract = "PADDLE_*"
            if extra:
                path = f"{r.path(kind)}.template.spec.containers[{r.main}].env"
                if self.env_shim:
                    container["env"] = [*list_at(container, "env"), *extra]
                    self.note(
                        path,
                        Category.APPROXIMATED,
                        f"v2 has no {kind.framework} runtime; the generated runtime sets v1's"
                        f" {contract} for the v2 pods' names",
                        "regenerate the runtime if the replica counts change",
                    )
                else:
                    self.note(
                        path,
                        Category.MANUAL,
                        f"v2 does not set v1's {contract}",
                        "convert with --env-shim, or set it in the runtime",
                    )
            jobs.append(
                self._replicated_job(
                    jname[role],
                    template,
                    ancestor=role == ancestor,
                    count=r.replicas,
                    exit_code=r.restart_policy == "ExitCode",
                )
            )
        # TF: the chief (or legacy master) decides. Paddle's Master is a parameter server that never
        # exits: its workers decide.
        deciders = [r for r in ("Chief", "Master") if r in reps and kind.kind == "TFJob"]
        success = [jname[deciders[0]]] if deciders else (["node"] if "Worker" in reps else None)
        if (
            kind.kind == "TFJob"
            and not deciders
            and reps.get("Worker", reps[ancestor]).replicas > 1
        ) and self.job.spec.get("successPolicy") != "AllWorkers":
            self.note(
                "spec.successPolicy",
                Category.APPROXIMATED,
                "v1 succeeded when worker 0 did; v2 succeeds when every worker has",
                "none, unless other workers never exit",
            )
        runtime = self._runtime({"numNodes": reps[ancestor].replicas}, jobs, success)
        return self._finish(runtime, {"numNodes": reps[ancestor].replicas})

    def _mpi(self) -> Conversion:
        spec, reps = self.job.spec, self.job.replicas
        launcher, worker = reps["Launcher"], reps.get("Worker")
        if worker is None or worker.replicas == 0:
            raise MigrateError(
                self.what,
                [
                    FieldError(
                        "spec.mpiReplicaSpecs.Worker.replicas",
                        "a launcher-only MPIJob cannot be expressed: a v2 MPI runtime needs at"
                        " least one node; give it Workers",
                    )
                ],
            )
        slots = int(spec.get("slotsPerWorker", 1))
        as_worker = bool(spec.get("runLauncherAsWorker", False))
        ssh = str(spec.get("sshAuthMountPath") or _MPI_SSH_DEFAULT)
        if self.kind.api_version == "kubeflow.org/v1":
            self.note(
                "spec.mpiReplicaSpecs",
                Category.MANUAL,
                "the kubeflow.org/v1 MPIJob reached workers with kubectl exec; v2 uses SSH",
                f"the image must run sshd and hold an ssh client; keys are mounted at {ssh}",
            )
        launcher_t = self._pod_template(launcher, rename=True)
        worker_t = self._pod_template(worker, rename=True)
        wc = worker_t["spec"]["containers"][worker.main]
        if "command" not in wc and "args" not in wc:
            wc["command"] = ["/usr/sbin/sshd", "-De"]
            self.note(
                f"{worker.path(self.kind)}.template.spec.containers[0].command",
                Category.APPROXIMATED,
                "the MPI Operator started sshd in workers without a command; v2 does not",
                "none: the runtime sets command [/usr/sbin/sshd, -De]",
            )
        self.note(
            "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env",
            Category.MANUAL,
            "v2 sets no K_MPI_JOB_ROLE and does not hide GPUs from the launcher",
            "none unless the code reads K_MPI_JOB_ROLE",
        )
        node_job = self._replicated_job(
            "node",
            worker_t,
            ancestor=False,
            count=1,
            exit_code=worker.restart_policy == "ExitCode",
            backoff=False,
        )
        launcher_job = self._replicated_job(
            "launcher",
            launcher_t,
            ancestor=True,
            count=1,
            exit_code=launcher.restart_policy == "ExitCode",
        )
        if spec.get("launcherCreationPolicy") == "WaitForWorkersReady":
            launcher_job["dependsOn"] = [{"name": "node", "status": "Ready"}]
        ml = {
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": slots,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": ssh,
                "runLauncherAsNode": as_worker,
            },
        }
        runtime = self._runtime(ml, [node_job, launcher_job], ["launcher"])
        trainer = {"numNodes": worker.replicas + (1 if as_worker else 0), "numProcPerNode": slots}
        return self._finish(runtime, trainer)


def dumps_report(conversions: list[Conversion]) -> str:
    """The machine-readable report of several conversions."""
    return json.dumps([c.report_dict() for c in conversions], indent=2)
