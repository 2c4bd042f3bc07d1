"""The Training Operator v1 kinds and MPI Operator's MPIJob as data, and reading one v1 job.

Facts per kind (default container, port, restart policy, roles) are upstream's
(reference §2); a refusal names every malformed field at once, as ``validate()`` does.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_dict, dicts, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.api.labels import TRAINER_API_VERSION
from kubetrain.api.schema import drop_nulls, schema_errors
from kubetrain.migrate.report import MigrateError

__all__ = ["KINDS", "Kind", "Replica", "V1Job", "is_v1_job", "read_v1_job"]

Obj = dict[str, Any]

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Kind:
    """One v1 kind: where its replicas live and what v1 assumed about its pods."""

    kind: str
    api_version: str
    framework: str  # the trainer.kubeflow.org/framework label of a generated runtime
    specs_key: str
    roles: tuple[str, ...]  # canonical replica types, in rank order
    container: str | None  # the framework's default container; None: containers[0] (MPI)
    port_name: str | None
    port: int | None
    restart_policy: dict[str, str]  # per role; "*" for all
    default_runtime: str | None  # the v2.3 ClusterTrainingRuntime it may map onto
    required_roles: tuple[str, ...] = ()
    single_roles: tuple[str, ...] = ()  # roles whose replicas must be exactly 1
    default_replicas: dict[str, int] = field(default_factory=dict)

    def restart(self, role: str) -> str:
        return self.restart_policy.get(role, self.restart_policy.get("*", "Never"))


KINDS: dict[tuple[str, str], Kind] = {
    ("kubeflow.org/v1", "PyTorchJob"): Kind(
        "PyTorchJob",
        "kubeflow.org/v1",
        "torch",
        "pytorchReplicaSpecs",
        ("Master", "Worker"),
        "pytorch",
        "pytorchjob-port",
        23456,
        {"*": "OnFailure"},
        "torch-distributed",
        single_roles=("Master",),
    ),
    ("kubeflow.org/v1", "TFJob"): Kind(
        "TFJob",
        "kubeflow.org/v1",
        "tensorflow",
        "tfReplicaSpecs",
        ("Chief", "Master", "PS", "Worker", "Evaluator"),
        "tensorflow",
        "tfjob-port",
        2222,
        {"*": "Never"},
        None,
    ),
    ("kubeflow.org/v1", "XGBoostJob"): Kind(
        "XGBoostJob",
        "kubeflow.org/v1",
        "xgboost",
        "xgbReplicaSpecs",
        ("Master", "Worker"),
        "xgboost",
        "xgboostjob-port",
        9999,
        {"*": "Never"},
        "xgboost-distributed",
        required_roles=("Master",),
        single_roles=("Master",),
    ),
    ("kubeflow.org/v1", "JAXJob"): Kind(
        "JAXJob",
        "kubeflow.org/v1",
        "jax",
        "jaxReplicaSpecs",
        ("Worker",),
        "jax",
        "jaxjob-port",
        6666,
        {"*": "Never"},
        "jax-distributed",
        required_roles=("Worker",),
    ),
    ("kubeflow.org/v1", "PaddleJob"): Kind(
        "PaddleJob",
        "kubeflow.org/v1",
        "paddle",
        "paddleReplicaSpecs",
        ("Master", "Worker"),
        "paddle",
        "master",
        36543,
        {"*": "OnFailure"},
        None,
    ),
    ("kubeflow.org/v2beta1", "MPIJob"): Kind(
        "MPIJob",
        "kubeflow.org/v2beta1",
        "mpi",
        "mpiReplicaSpecs",
        ("Launcher", "Worker"),
        None,
        None,
        None,
        {"Launcher": "OnFailure", "Worker": "Never"},
        None,
        required_roles=("Launcher",),
        single_roles=("Launcher",),
        default_replicas={"Worker": 0},
    ),
    ("kubeflow.org/v1", "MPIJob"): Kind(
        "MPIJob",
        "kubeflow.org/v1",
        "mpi",
        "mpiReplicaSpecs",
        ("Launcher", "Worker"),
        "mpi",
        "mpi-port",
        9999,
        {"*": "Never"},
        None,
        required_roles=("Launcher",),
        single_roles=("Launcher",),
    ),
}
_KIND_NAMES = {k.kind for k in KINDS.values()}

# The v1 CRDs' types of the spec fields a conversion reads (beside the replica specs).
_SPEC_TYPES: dict[str, type | tuple[type, ...]] = {
    "runPolicy": dict,
    "runPolicy.cleanPodPolicy": str,
    "runPolicy.ttlSecondsAfterFinished": int,
    "runPolicy.activeDeadlineSeconds": int,
    "runPolicy.backoffLimit": int,
    "runPolicy.suspend": bool,
    "runPolicy.managedBy": str,
    "runPolicy.schedulingPolicy": dict,
    "nprocPerNode": (str, int),
    "elasticPolicy": dict,
    "elasticPolicy.nProcPerNode": int,
    "successPolicy": str,
    "enableDynamicWorker": bool,
    "slotsPerWorker": int,
    "runLauncherAsWorker": bool,
    "sshAuthMountPath": str,
    "launcherCreationPolicy": str,
    "mpiImplementation": str,
    "mainContainer": str,
    "cleanPodPolicy": str,
}
_JSON_NAMES = {dict: "object", str: "string", int: "integer", bool: "boolean"}


def _spec_type_errors(spec: Obj) -> list[FieldError]:
    errors = []
    for path, wanted in _SPEC_TYPES.items():
        node: Any = spec
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue
        types = wanted if isinstance(wanted, tuple) else (wanted,)
        # bool is an int in Python, never in JSON.
        if not isinstance(node, types) or (isinstance(node, bool) and bool not in types):
            names = " or ".join(_JSON_NAMES[t] for t in types)
            got = _JSON_NAMES.get(type(node), "array" if isinstance(node, list) else "number")
            shown = json.dumps(node, default=str)
            errors.append(
                FieldError(
                    f"spec.{path}", f"Invalid value: {shown}: must be of type {names}, not {got}"
                )
            )
    return errors


def _template_errors(template: Any, path: str) -> list[FieldError]:
    """A replica's pod template against the PodTemplateSpec schema kubetrain's own CRDs embed
    (a TrainingRuntime's replicated job), with paths given back in v1 terms."""
    if not isinstance(template, dict):
        return [FieldError(path, "Invalid value: must be object")]
    probe = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": "probe"},
        "spec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": template}}}]}}},
    }  # fmt: skip
    prefix = "spec.template.spec.replicatedJobs[0].template.spec.template"
    return [
        FieldError(path + e.path.removeprefix(prefix), e.reason, e.type)
        for e in schema_errors(probe)
        if e.path.startswith(prefix)
    ]


@dataclass(frozen=True, slots=True)
class Replica:
    """One role of a v1 job, as read (its key keeps the user's casing for report paths)."""

    role: str  # canonical: Master, Worker, PS, ...
    key: str  # as written: master, Worker, ps, ...
    replicas: int
    template: Obj
    restart_policy: str
    main: int  # index of the main container in template.spec.containers

    @property
    def lower(self) -> str:
        return self.role.lower()

    def path(self, kind: Kind) -> str:
        return f"spec.{kind.specs_key}.{self.key}"

    @property
    def pod_spec(self) -> Obj:
        return obj_at(self.template, "spec")

    @property
    def container(self) -> Obj:
        c: Obj = self.pod_spec["containers"][self.main]
        return c

    def port(self, kind: Kind) -> int | None:
        """The port v1 read back for addresses: a declared one with the default name wins."""
        for p in dicts(self.container.get("ports")):
            if p.get("name") == kind.port_name:
                value = p.get("containerPort")
                if isinstance(value, int):
                    return value
        return kind.port


@dataclass(frozen=True, slots=True)
class V1Job:
    """A v1 job that passed the v1 webhooks' checks."""

    kind: Kind
    obj: Obj
    name: str
    namespace: str | None
    replicas: dict[str, Replica]  # canonical role -> replica, in kind.roles order

    @property
    def spec(self) -> Obj:
        return obj_at(self.obj, "spec")

    @property
    def total(self) -> int:
        return sum(r.replicas for r in self.replicas.values())


def is_v1_job(obj: Any) -> bool:
    """True for every kind ``read_v1_job`` handles (it may still refuse the object)."""
    return isinstance(obj, dict) and (obj.get("apiVersion"), obj.get("kind")) in KINDS


def read_v1_job(obj: Any, *, source: str = "") -> V1Job:
    """Check a v1 job as its webhook would and return it; MigrateError with every problem."""
    what = source or "input"
    if not isinstance(obj, dict):
        raise MigrateError(what, [FieldError("", "not a Kubernetes object (a mapping)")])
    # As the API server stores it: explicit nulls are absent fields.
    obj = drop_nulls(copy.deepcopy(obj))
    api_version, kind_name = obj.get("apiVersion"), obj.get("kind")
    kind = KINDS.get((str(api_version), str(kind_name)))
    if kind is None:
        if str(api_version).startswith("kubeflow.org/") and str(kind_name) in _KIND_NAMES:
            raise MigrateError(
                what,
                [FieldError("apiVersion", f"unknown version {api_version!r} of {kind_name}")],
            )
        if str(api_version).startswith("kubeflow.org/"):
            raise MigrateError(
                what,
                [
                    FieldError(
                        "kind",
                        f"unknown kind {kind_name!r}: kubetrain migrates PyTorchJob, TFJob, XGBoostJob,"
                        " JAXJob, PaddleJob and MPIJob",
                    )
                ],
            )
        raise MigrateError(
            what,
            [
                FieldError(
                    "kind",
                    f"{api_version}/{kind_name} is not a Training Operator v1 job (expected"
                    " kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, JAXJob, PaddleJob or MPIJob,"
                    " or kubeflow.org/v2beta1 MPIJob)",
                )
            ],
        )
    errors: list[FieldError] = []
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        errors.append(
            FieldError(
                "metadata.name",
                "Required value: a converted job needs a fixed name (its pods' addresses and"
                " generated runtime are named after it); generateName is not enough",
                "Required",
            )
        )
        name = ""
    elif not _DNS1035.match(name) or len(name) > 63:
        errors.append(FieldError("metadata.name", f"{name!r} is not a DNS-1035 label"))
    namespace = meta.get("namespace")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise MigrateError(f"{what}: {kind.kind} {name}", [FieldError("spec", "Required value")])
    errors += _spec_type_errors(spec)
    specs = spec.get(kind.specs_key)
    base = f"spec.{kind.specs_key}"
    if not isinstance(specs, dict) or not specs:
        errors.append(
            FieldError(base, f"Required value: a {kind.kind} needs its replica specs", "Required")
        )
        raise MigrateError(f"{what}: {kind.kind} {name}", errors)
    canonical = {r.lower(): r for r in kind.roles}
    replicas: dict[str, Replica] = {}
    for key, rspec in specs.items():
        path = f"{base}.{key}"
        role = canonical.get(str(key).lower())
        if role is None:
            errors.append(
                FieldError(
                    path,
                    f"unknown replica type {key!r}; {kind.kind} has {', '.join(kind.roles)}",
                    "NotSupported",
                )
            )
            continue
        if role in replicas:
            errors.append(FieldError(path, f"replica type {role} is given twice", "Duplicate"))
            continue
        if not isinstance(rspec, dict):
            errors.append(FieldError(path, "must be an object"))
            continue
        count = rspec.get("replicas", kind.default_replicas.get(role, 1))
        minimum = 0 if role in kind.default_replicas else 1
        if not isinstance(count, int) or isinstance(count, bool) or count < minimum:
            errors.append(FieldError(f"{path}.replicas", f"must be an integer >= {minimum}"))
            continue
        if role in kind.single_roles and count != 1:
            errors.append(FieldError(f"{path}.replicas", f"{role} replicas must be 1"))
        template = rspec.get("template")
        template_errors = _template_errors(template, f"{path}.template")
        if template_errors:
            errors += template_errors
            continue
        containers = as_dict(as_dict(template).get("spec")).get("containers")
        if not isinstance(containers, list) or not containers:
            errors.append(
                FieldError(
                    f"{path}.template.spec.containers",
                    "Required value: at least one container",
                    "Required",
                )
            )
            continue
        main = 0
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("image"):
                errors.append(
                    FieldError(
                        f"{path}.template.spec.containers[{i}].image", "Required value", "Required"
                    )
                )
        wanted = kind.container
        if kind.kind == "MPIJob" and kind.api_version == "kubeflow.org/v1":
            wanted = str(spec.get("mainContainer") or "mpi")
        if wanted is not None and kind.api_version != "kubeflow.org/v2beta1":
            found = [i for i, c in enumerate(containers) if as_dict(c).get("name") == wanted]
            if not found:
                errors.append(
                    FieldError(
                        f"{path}.template.spec.containers",
                        f"no container named {wanted!r} (the {kind.kind} default container)",
                    )
                )
                continue
            main = found[0]
        restart = rspec.get("restartPolicy") or kind.restart(role)
        if restart not in ("Always", "OnFailure", "Never", "ExitCode"):
            errors.append(FieldError(f"{path}.restartPolicy", f"unknown value {restart!r}"))
        replicas[role] = Replica(role, str(key), count, as_dict(template), str(restart), main)
    for role in kind.required_roles:
        if role not in replicas and not any(e.path.startswith(base) for e in errors):
            errors.append(
                FieldError(
                    f"{base}.{role}", f"Required value: a {kind.kind} needs a {role}", "Required"
                )
            )
    if kind.kind == "TFJob" and "Chief" in replicas and "Master" in replicas:
        errors.append(FieldError(base, "Chief and Master cannot both be given"))
    if kind.kind == "PyTorchJob" and "elasticPolicy" in spec and "Worker" not in replicas:
        errors.append(FieldError(f"{base}.Worker", "Required value: elasticPolicy needs a Worker"))
    if errors:
        raise MigrateError(f"{what}: {kind.kind} {name}", errors)
    ordered = {r: replicas[r] for r in kind.roles if r in replicas}
    return V1Job(kind, obj, name, namespace if isinstance(namespace, str) else None, ordered)
