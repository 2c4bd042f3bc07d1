"""TrainJobs and runtimes written for Trainer v2.0-v2.2 (and the v2alpha1 prototype) on v2.3.

Each rule of reference §6.3 finds what v2.3 refuses or treats differently and, where the
intent is clear, rewrites it (§6.4). ``upgrade`` does both in one pass over a copy, so a finding
marked fixable is exactly what ``--fix`` changed. The fixed objects are then admitted by
kubetrain's admission (``kubetrain.migrate.admit``): no v2.3 rule is repeated here.
"""

from __future__ import annotations

import re
from typing import Any

from kubetrain.api.access import as_dict, as_list
from kubetrain.api.labels import ANCESTOR_LABEL, FRAMEWORK_LABEL, TRAINER_API_VERSION
from kubetrain.api.schema import drop_nulls, schema_errors
from kubetrain.migrate.admit import find_runtime
from kubetrain.migrate.report import Finding, Severity
from kubetrain.runtime.core import CLUSTER_TRAINING_RUNTIME, runtime_ref
from kubetrain.runtime.plugins.mpi import RESERVED_ENV as MPI_RESERVED
from kubetrain.runtime.podspec import tree_copy

__all__ = ["MANAGER", "is_trainer_object", "upgrade", "upgrade_check", "upgrade_fix"]

Obj = dict[str, Any]

MANAGER = "kubetrain.dev/upgrade-check"
PROTOTYPE_API_VERSION = "kubeflow.org/v2alpha1"
_KINDS = ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
_FINALIZER = "trainer.kubeflow.org/resource-in-use"
_V20_POD_FIELDS = (
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "volumes",
    "initContainers",
    "containers",
    "schedulingGates",
)
_FRAMEWORKS = {"torch": "torch", "jax": "jax", "xgboost": "xgboost", "flux": "flux", "mpi": "mpi"}


def is_trainer_object(obj: Any) -> bool:
    """A TrainJob or runtime of Trainer v2 (any version upgrade-check knows)."""
    return (
        isinstance(obj, dict)
        and obj.get("kind") in _KINDS
        and obj.get("apiVersion") in (TRAINER_API_VERSION, PROTOTYPE_API_VERSION)
    )


class _Pass:
    def __init__(self, obj: Obj, runtimes: list[Obj], old_runtimes: list[Obj]) -> None:
        self.old_runtimes = old_runtimes
        self.fixed: Obj = drop_nulls(tree_copy(obj))
        self.runtimes = runtimes
        self.findings: list[Finding] = []

    def find(
        self, rule: str, path: str, severity: Severity, message: str, fix: str, fixable: bool
    ) -> None:
        self.findings.append(Finding(rule, path, severity, message, fix, fixable))

    # --- TrainJob -----------------------------------------------------------------------------

    def trainjob(self) -> None:
        spec = self.fixed.setdefault("spec", {})
        patches: list[Obj] = []
        old = as_list(spec.pop("podSpecOverrides", None))
        for i, entry in enumerate(old):
            patches.append(self._override_patch(as_dict(entry), i, len(old), flat=True))
            self.find(
                "U-POD-SPEC-OVERRIDES",
                f"spec.podSpecOverrides[{i}]",
                Severity.BREAKS,
                "podSpecOverrides was removed in v2.1; v2.3 refuses the field",
                "the same pod fields as a spec.runtimePatches entry",
                True,
            )
        old = as_list(spec.pop("podTemplateOverrides", None))
        for i, entry in enumerate(old):
            patches.append(self._override_patch(as_dict(entry), i, len(old), flat=False))
            self.find(
                "U-POD-TEMPLATE-OVERRIDES",
                f"spec.podTemplateOverrides[{i}]",
                Severity.BREAKS,
                "podTemplateOverrides was removed in v2.2; v2.3 refuses the field",
                "the same overrides as a spec.runtimePatches entry",
                True,
            )
        meta: Obj = {}
        for key in ("labels", "annotations"):
            if key in spec:
                meta[key] = spec.pop(key)
                self.find(
                    "U-SPEC-LABELS",
                    f"spec.{key}",
                    Severity.BREAKS,
                    f"spec.{key} was removed in v2.2 (they were copied onto the JobSet)",
                    f"runtimePatches[].trainingRuntimeSpec.template.metadata.{key}",
                    True,
                )
        if meta:
            patches.insert(
                0,
                {
                    "manager": f"{MANAGER}-jobset",
                    "trainingRuntimeSpec": {"template": {"metadata": meta}},
                },
            )
        if patches:
            spec["runtimePatches"] = [*as_list(spec.get("runtimePatches")), *patches]
        trainer = as_dict(spec.get("trainer"))
        nproc = trainer.get("numProcPerNode")
        if isinstance(nproc, str):
            if nproc.isdigit():
                trainer["numProcPerNode"] = int(nproc)
                how = f"write the integer {nproc}"
            else:
                del trainer["numProcPerNode"]
                how = "remove it: v2.3 picks the GPU count, else the CPU request (its 'auto')"
            self.find(
                "U-NPROC-STRING",
                "spec.trainer.numProcPerNode",
                Severity.BREAKS,
                f"numProcPerNode {nproc!r}: an integer since v2.2",
                how,
                True,
            )
        _, ref_kind, ref_name = runtime_ref({"spec": spec})
        if ref_name == "mpi-distributed" and ref_kind == CLUSTER_TRAINING_RUNTIME:
            self.find(
                "U-RUNTIME-GONE",
                "spec.runtimeRef.name",
                Severity.CHANGES_BEHAVIOUR,
                "the mpi-distributed ClusterTrainingRuntime is not shipped since v2.1",
                "apply your own copy of it, or use deepspeed-distributed",
                False,
            )
        for which in ("dataset", "model"):
            uri = as_dict(as_dict(spec.get("initializer")).get(which)).get("storageUri")
            if isinstance(uri, str) and uri and not _URI.match(uri):
                self.find(
                    "U-STORAGE-URI",
                    f"spec.initializer.{which}.storageUri",
                    Severity.BREAKS,
                    f"{uri!r} is not a scheme://... URI (a v2.3 CRD rule)",
                    "write it as a URI, e.g. hf://... or s3://...",
                    False,
                )
        written = find_runtime(self.fixed, self.old_runtimes)
        meant = as_dict(
            as_dict(as_dict(as_dict(written).get("spec")).get("mlPolicy")).get("torch")
        ).get("numProcPerNode")
        if "numProcPerNode" not in trainer and str(meant).isdigit():
            # The runtime's count goes away with U-TORCH-NPROC: the TrainJob keeps it.
            self.fixed["spec"].setdefault("trainer", trainer)["numProcPerNode"] = int(str(meant))
            self.find(
                "U-TORCH-NPROC",
                "spec.trainer.numProcPerNode",
                Severity.CHANGES_BEHAVIOUR,
                f"its runtime's mlPolicy.torch.numProcPerNode ({meant}) is removed in v2.2",
                f"set trainer.numProcPerNode: {meant}",
                True,
            )
        runtime = find_runtime(self.fixed, self.runtimes)
        if runtime is None:
            return
        mpi = "mpi" in as_dict(as_dict(runtime.get("spec")).get("mlPolicy"))
        env = as_list(trainer.get("env"))
        if mpi and any(as_dict(e).get("name") in MPI_RESERVED for e in env):
            trainer["env"] = [e for e in env if as_dict(e).get("name") not in MPI_RESERVED]
            for i, e in enumerate(env):
                if as_dict(e).get("name") in MPI_RESERVED:
                    self.find(
                        "U-MPI-RESERVED-ENV",
                        f"spec.trainer.env[{i}]",
                        Severity.BREAKS,
                        f"{e['name']} is set by the MPI runtime; v2.3 refuses it in trainer.env",
                        "remove it",
                        True,
                    )
        if trainer.get("resourcesPerNode") and _node_resources(runtime):
            self.find(
                "U-RESOURCES-MERGE",
                "spec.trainer.resourcesPerNode",
                Severity.CHANGES_BEHAVIOUR,
                "v2.3 merges resourcesPerNode into the runtime's node resources; v2.2 replaced them",
                "list every resource key you want to change",
                False,
            )

    def _override_patch(self, entry: Obj, i: int, count: int, *, flat: bool) -> Obj:
        pod: Obj = {}
        if flat:
            spec = {k: tree_copy(entry[k]) for k in _V20_POD_FIELDS if k in entry}
        else:
            spec = tree_copy(as_dict(entry.get("spec")))
            if entry.get("metadata"):
                pod["metadata"] = tree_copy(entry["metadata"])
        # v2.3 refuses env on the node container in a patch; the trainer's env is the same place.
        for c in as_list(spec.get("containers")):
            if as_dict(c).get("name") == "node" and "env" in c:
                trainer = self.fixed["spec"].setdefault("trainer", {})
                trainer["env"] = [*as_list(trainer.get("env")), *c.pop("env")]
        if spec:
            pod["spec"] = spec
        jobs = [
            {"name": as_dict(t).get("name"), "template": {"spec": {"template": tree_copy(pod)}}}
            for t in as_list(entry.get("targetJobs"))
        ]
        manager = MANAGER if count == 1 else f"{MANAGER}-{i}"
        return {
            "manager": manager,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}},
        }

    # --- runtimes -----------------------------------------------------------------------------

    def runtime(self) -> None:
        meta = self.fixed.setdefault("metadata", {})
        spec = as_dict(self.fixed.get("spec"))
        torch = as_dict(as_dict(spec.get("mlPolicy")).get("torch"))
        if "numProcPerNode" in torch:
            value = torch.pop("numProcPerNode")
            extra = (
                f"; set trainer.numProcPerNode: {value} in its TrainJobs"
                if str(value).isdigit()
                else ""
            )
            self.find(
                "U-TORCH-NPROC",
                "spec.mlPolicy.torch.numProcPerNode",
                Severity.BREAKS,
                "removed in v2.2 (v2.0/v2.1 CRDs defaulted it to 'auto')",
                f"delete it{extra}",
                True,
            )
        if "elasticPolicy" in torch:
            del torch["elasticPolicy"]
            self.find(
                "U-TORCH-ELASTIC",
                "spec.mlPolicy.torch.elasticPolicy",
                Severity.BREAKS,
                "removed in v2.2; no controller ever acted on it",
                "delete it",
                True,
            )
        jobs = as_list(as_dict(as_dict(spec.get("template")).get("spec")).get("replicatedJobs"))
        for i, rjob in enumerate(jobs):
            template = as_dict(as_dict(rjob).get("template"))
            pod = as_dict(as_dict(as_dict(template.get("spec")).get("template")).get("spec"))
            containers = as_list(pod.get("containers"))
            step = as_dict(as_dict(template.get("metadata")).get("labels")).get(ANCESTOR_LABEL)
            base = f"spec.template.spec.replicatedJobs[{i}]"
            if step == "trainer" and not any(as_dict(c).get("name") == "node" for c in containers):
                fixable = len(containers) == 1
                if fixable:
                    containers[0]["name"] = "node"
                self.find(
                    "U-ANCESTOR-NODE",
                    f"{base}.template.spec.template.spec.containers",
                    Severity.BREAKS,
                    "the trainer job needs a container named node (webhook since v2.1)",
                    "rename the training container to node",
                    fixable,
                )
            name = as_dict(rjob).get("name")
            if name in ("dataset-initializer", "model-initializer"):
                for c in containers:
                    if as_dict(c).get("name") == name and not any(
                        as_dict(m).get("name") == "initializer"
                        for m in as_list(as_dict(c).get("volumeMounts"))
                    ):
                        self.find(
                            "U-INIT-VOLUME",
                            f"{base}.template.spec.template.spec.containers",
                            Severity.CHANGES_BEHAVIOUR,
                            f"{name} mounts no volume named initializer; v2.3 refuses TrainJobs"
                            " that set spec.initializer on this runtime",
                            "mount the shared volume as 'initializer'",
                            False,
                        )
        labels = as_dict(meta.get("labels"))
        if FRAMEWORK_LABEL not in labels:
            policy = as_dict(spec.get("mlPolicy"))
            # The runtime's name tells DeepSpeed and MLX apart from other MPI runtimes.
            named = [f for f in ("deepspeed", "mlx", "torchtune") if f in str(meta.get("name", ""))]
            framework = (
                named[0]
                if named
                else next((v for k, v in _FRAMEWORKS.items() if k in policy), None)
            )
            if framework is not None:
                meta["labels"] = {**labels, FRAMEWORK_LABEL: framework}
            self.find(
                "U-FRAMEWORK-LABEL",
                "metadata.labels",
                Severity.COSMETIC,
                f"no {FRAMEWORK_LABEL} label: the Kubeflow SDK does not list the runtime",
                f"add the label{f' ({framework})' if framework else ''}",
                framework is not None,
            )
        finalizers = as_list(meta.get("finalizers"))
        if _FINALIZER in finalizers:
            meta["finalizers"] = [f for f in finalizers if f != _FINALIZER]
            if not meta["finalizers"]:
                del meta["finalizers"]
            self.find(
                "U-FINALIZER",
                "metadata.finalizers",
                Severity.COSMETIC,
                f"{_FINALIZER} is no longer used (v2.3 strips it)",
                "drop it",
                True,
            )


def _node_resources(runtime: Obj) -> bool:
    for rjob in as_list(
        as_dict(as_dict(as_dict(runtime.get("spec")).get("template")).get("spec")).get(
            "replicatedJobs"
        )
    ):
        template = as_dict(as_dict(rjob).get("template"))
        if (
            as_dict(as_dict(template.get("metadata")).get("labels")).get(ANCESTOR_LABEL)
            != "trainer"
        ):
            continue
        pod = as_dict(as_dict(as_dict(template.get("spec")).get("template")).get("spec"))
        return any(
            as_dict(c).get("name") == "node" and as_dict(c).get("resources")
            for c in as_list(pod.get("containers"))
        )
    return False


def _malformed(obj: Obj) -> list[Finding]:
    """Schema errors (kubetrain's v2.3 CRD schema) outside the fields the rules rewrite: such an
    object is reported as it is and never rewritten."""
    if not isinstance(obj.get("metadata"), dict):
        return [
            Finding(
                "U-SCHEMA",
                "metadata",
                Severity.BREAKS,
                "Required value: an object",
                "give the object its metadata (name)",
                False,
            )
        ]
    probe: Obj = drop_nulls(tree_copy(obj))
    spec = as_dict(probe.get("spec"))
    for key in ("podSpecOverrides", "podTemplateOverrides", "labels", "annotations"):
        if probe.get("kind") == "TrainJob":
            spec.pop(key, None)
    if isinstance(as_dict(spec.get("trainer")).get("numProcPerNode"), str):
        del spec["trainer"]["numProcPerNode"]
    torch = as_dict(as_dict(spec.get("mlPolicy")).get("torch"))
    for key in ("numProcPerNode", "elasticPolicy"):
        torch.pop(key, None)
    return [
        Finding("U-SCHEMA", e.path, Severity.BREAKS, e.reason, "correct the field", False)
        for e in schema_errors(probe)
    ]


def upgrade(
    obj: Obj, runtimes: list[Obj] | None = None, old_runtimes: list[Obj] | None = None
) -> tuple[list[Finding], Obj]:
    """Findings for one object and its fixed copy (unchanged where nothing was fixable).

    ``runtimes``: the fixed runtimes a TrainJob may reference; ``old_runtimes`` the same as
    written (what the TrainJob meant when it was written)."""
    if obj.get("apiVersion") == PROTOTYPE_API_VERSION:
        finding = Finding(
            "U-PROTOTYPE",
            "apiVersion",
            Severity.BREAKS,
            "kubeflow.org/v2alpha1 was a pre-release prototype in Training Operator v1.9.0-v1.9.2,"
            " not a Trainer release; its fields do not map one to one",
            f"rewrite it as {TRAINER_API_VERSION} by hand (docs/migrate.md)",
            False,
        )
        return [finding], tree_copy(obj)
    malformed = _malformed(obj)
    if malformed:
        return malformed, tree_copy(obj)
    one = _Pass(obj, runtimes or [], old_runtimes or [])
    if obj.get("kind") == "TrainJob":
        one.trainjob()
    else:
        one.runtime()
    return one.findings, one.fixed


def _each(objs: list[Obj]) -> list[tuple[list[Finding], Obj] | None]:
    old = [o for o in objs if o.get("kind") != "TrainJob" and is_trainer_object(o)]
    fixed = [upgrade(o)[1] for o in old]
    return [upgrade(o, fixed, old) if is_trainer_object(o) else None for o in objs]


def upgrade_check(objs: list[Obj]) -> list[list[Finding]]:
    """Findings per object (runtimes among ``objs`` are used to judge the TrainJobs)."""
    return [r[0] if r is not None else [] for r in _each(objs)]


def upgrade_fix(objs: list[Obj]) -> list[Obj]:
    """The v2.3 form of every object (non-Trainer objects unchanged)."""
    return [r[1] if r is not None else o for r, o in zip(_each(objs), objs, strict=True)]
