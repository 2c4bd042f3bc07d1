#!/usr/bin/env python3
"""Generate kubetrain's CRD manifests from its own type descriptions.

Sources, and nothing else:
- ``kubetrain.api.types``: the TypedDicts of TrainJob, TrainingRuntime, ClusterTrainingRuntime and
  JobSet, whose ``Annotated`` markers carry defaults and validations;
- the Kubernetes OpenAPI definitions shipped by the ``kubernetes-validate`` package, for every
  core/v1, batch/v1 and meta/v1 type they embed (Kubernetes 1.36: the first release whose PodSpec
  has every field that Trainer v2.3 / JobSet v0.12 embed, e.g. ``schedulingGroup``).

OpenAPI definitions lose a few facts that live only as Go markers in Kubernetes' source (field
defaults such as ``protocol: TCP``, atomic structs, metav1.Condition's validations); they are
restored from the ``GO_MARKERS`` table below.

Output (committed): ``src/kubetrain/api/crds/*.yaml`` (CRDs with descriptions, for people and
manifests) and ``src/kubetrain/api/crds/crds.json`` (the same CRDs, compact, without schema
descriptions: what the package reads at run time). Run: ``.venv/bin/python tools/gen_crds.py`` (``--check`` fails if output is stale).
"""

from __future__ import annotations

import copy
import json
import sys
import typing
from typing import Any

import generator
import yaml
from generator import REPO

sys.path.insert(0, str(REPO / "src"))

from kubetrain.api import core, markers, types
from kubetrain.kube import kinds
from kubetrain.kube.kinds import Kind

__all__ = ["K8S_VERSION", "build_crds", "main"]

K8S_VERSION = "1.36.0"
OUT = REPO / "src" / "kubetrain" / "api" / "crds"

Schema = dict[str, Any]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_DNS_LABEL_PREFIX = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"

# Facts from Kubernetes' Go markers (+default, +structType=atomic inherited through embedding,
# kubebuilder validations on metav1.Condition) that the OpenAPI v2 definitions do not carry.
# definition -> {"": object-level keys, property: keys to merge into that property}.
# LocalObjectReference's `name` defaults to ""; the types embedding it take that default, and
# its +structType=atomic too where the definitions lose it.
_NAMED: dict[str, Schema] = {"name": {"default": ""}}
_ATOMIC_NAMED: dict[str, Schema] = {"": {"x-kubernetes-map-type": "atomic"}, **_NAMED}
GO_MARKERS: dict[str, dict[str, Schema]] = {
    "io.k8s.api.core.v1.LocalObjectReference": _NAMED,
    "io.k8s.api.core.v1.ConfigMapKeySelector": _NAMED,
    "io.k8s.api.core.v1.SecretKeySelector": _NAMED,
    "io.k8s.api.core.v1.SecretReference": {},
    "io.k8s.api.core.v1.FileKeySelector": {"optional": {"default": False}},
    "io.k8s.api.core.v1.GRPCAction": {"service": {"default": ""}},
    "io.k8s.api.core.v1.ContainerPort": {"protocol": {"default": "TCP"}},
    "io.k8s.api.core.v1.ConfigMapEnvSource": _ATOMIC_NAMED,
    "io.k8s.api.core.v1.SecretEnvSource": _ATOMIC_NAMED,
    "io.k8s.api.core.v1.ConfigMapVolumeSource": _ATOMIC_NAMED,
    "io.k8s.api.core.v1.ConfigMapProjection": _ATOMIC_NAMED,
    "io.k8s.api.core.v1.SecretProjection": _ATOMIC_NAMED,
    "io.k8s.api.core.v1.AzureDiskVolumeSource": {
        "fsType": {"default": "ext4"},
        "readOnly": {"default": False},
    },
    "io.k8s.api.core.v1.ISCSIVolumeSource": {"iscsiInterface": {"default": "default"}},
    "io.k8s.api.core.v1.RBDVolumeSource": {
        "keyring": {"default": "/etc/ceph/keyring"},
        "pool": {"default": "rbd"},
        "user": {"default": "admin"},
    },
    "io.k8s.api.core.v1.ScaleIOVolumeSource": {
        "fsType": {"default": "xfs"},
        "storageMode": {"default": "ThinProvisioned"},
    },
    "io.k8s.apimachinery.pkg.apis.meta.v1.Condition": {
        "message": {"maxLength": 32768},
        "observedGeneration": {"minimum": 0},
        "reason": {
            "maxLength": 1024,
            "minLength": 1,
            "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        "status": {"enum": ["True", "False", "Unknown"]},
        "type": {
            "maxLength": 316,
            "pattern": _DNS_LABEL_PREFIX + r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    },
}

# Keys of the OpenAPI definitions that a CRD schema does not carry.
_DROP = {"x-kubernetes-patch-merge-key", "x-kubernetes-patch-strategy", "x-kubernetes-unions"}


def _embedded_meta() -> Schema:
    """What an ObjectMeta inside a template keeps in a CRD (the API server prunes the rest)."""
    str_map: Schema = {"additionalProperties": {"type": "string"}, "type": "object"}
    return {
        "properties": {
            "annotations": dict(str_map),
            "finalizers": {"items": {"type": "string"}, "type": "array"},
            "labels": dict(str_map),
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
        "type": "object",
    }


class OpenAPIConverter:
    """Inline Kubernetes OpenAPI definitions into structural CRD schemas."""

    def __init__(self, version: str = K8S_VERSION) -> None:
        self.defs: dict[str, Schema] = generator.kube_definitions(version)
        self.cache: dict[str, Schema] = {}

    def definition(self, name: str) -> Schema:
        if name not in self.cache:
            self.cache[name] = self._convert_definition(name)
        # Each use gets its own copy: the YAML must not contain anchors.
        copied: Schema = json.loads(json.dumps(self.cache[name]))
        return copied

    def _convert_definition(self, name: str) -> Schema:
        short = name.rsplit(".", 2)
        if name.endswith("api.resource.Quantity"):
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        if name.endswith("util.intstr.IntOrString"):
            return {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
        if short[-1] in ("Time", "MicroTime") and "meta.v1" in name:
            return {"format": "date-time", "type": "string"}
        if name.endswith("meta.v1.ObjectMeta"):
            return _embedded_meta()
        out = self._node(self.defs[name])
        if out.pop("x-kubernetes-group-version-kind", None) is not None:
            # kubernetes-validate pins apiVersion/kind of top-level kinds with an enum; a CRD
            # embedding such an object (JobSet's PVC templates) leaves them free.
            for key in ("apiVersion", "kind"):
                out["properties"][key].pop("enum", None)
        for prop, extra in GO_MARKERS.get(name, {}).items():
            target = out if prop == "" else out["properties"][prop]
            target.update(extra)
        return out

    def _node(self, d: Schema) -> Schema:
        if "$ref" in d:
            ref = self.definition(d["$ref"].rsplit("/", 1)[-1])
            if "description" in d and "description" not in ref:
                ref["description"] = d["description"]
            return ref
        out: Schema = {}
        for k, v in d.items():
            if k in _DROP:
                continue
            if k == "type" and isinstance(v, list):
                kinds = [t for t in v if t != "null"]
                out[k] = kinds[0] if len(kinds) == 1 else kinds
            elif k == "properties":
                out[k] = {p: self._node(s) for p, s in v.items()}
            elif k in ("items", "additionalProperties") and isinstance(v, dict):
                out[k] = self._node(v)
            elif k in ("oneOf", "allOf", "anyOf") and len(v) == 1:
                out.update(self._node(v[0]))
            elif k == "required":
                # controller-gen sorts required lists; so do we, so the output is stable.
                out[k] = sorted(v)
            else:
                out[k] = v
        return out


class SchemaBuilder:
    """Turn the annotated TypedDicts of kubetrain.api.types into CRD schemas."""

    def __init__(self, conv: OpenAPIConverter) -> None:
        self.conv = conv

    def of(self, tp: Any) -> Schema:
        metas: list[Any] = []
        origin = typing.get_origin(tp)
        if origin in (typing.Required, typing.NotRequired):
            tp = typing.get_args(tp)[0]
        if typing.get_origin(tp) is typing.Annotated:
            metas = list(tp.__metadata__)
            tp = tp.__origin__
        openapi = next((m for m in metas if isinstance(m, markers.OpenAPI)), None)
        schema = self.conv.definition(openapi.value) if openapi is not None else self._plain(tp)
        self._apply(schema, metas)
        return schema

    def _plain(self, tp: Any) -> Schema:
        origin = typing.get_origin(tp)
        if typing.is_typeddict(tp):
            if tp.__module__ == core.__name__:
                return self.conv.definition(core.OPENAPI_DEFINITIONS[tp.__name__])
            return self.object(tp)
        if origin is list:
            return {"items": self.of(typing.get_args(tp)[0]), "type": "array"}
        if origin is dict:
            value = typing.get_args(tp)[1]
            if value is Any:
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            return {"additionalProperties": self.of(value), "type": "object"}
        if origin is typing.Literal:
            return {"enum": list(typing.get_args(tp)), "type": "string"}
        if tp is str:
            return {"type": "string"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        raise TypeError(f"no schema for {tp!r}")

    def object(self, td: Any) -> Schema:
        hints = typing.get_type_hints(td, include_extras=True)
        props: Schema = {}
        required: list[str] = []
        for name, hint in hints.items():
            if typing.get_origin(hint) is typing.Required:
                required.append(name)
            props[name] = self.of(hint)
        schema: Schema = {"type": "object"}
        if props:
            schema["properties"] = props
        if required:
            schema["required"] = sorted(required)
        doc = (td.__doc__ or "").strip()
        if doc and not doc.startswith(td.__name__ + "("):
            schema["description"] = " ".join(doc.split())
        return schema

    @staticmethod
    def _apply(schema: Schema, metas: list[Any]) -> None:
        for m in metas:
            match m:
                case markers.Doc(text):
                    schema["description"] = text
                case markers.Default(value):
                    schema["default"] = value
                case markers.Format(name):
                    schema["format"] = name
                case markers.MinLength(v):
                    schema["minLength"] = v
                case markers.MaxLength(v):
                    schema["maxLength"] = v
                case markers.Minimum(v):
                    schema["minimum"] = v
                case markers.Maximum(v):
                    schema["maximum"] = v
                case markers.MinItems(v):
                    schema["minItems"] = v
                case markers.MaxItems(v):
                    schema["maxItems"] = v
                case markers.MinProperties(v):
                    schema["minProperties"] = v
                case markers.Pattern(regex):
                    schema["pattern"] = regex
                case markers.Rule(rule, message):
                    schema.setdefault("x-kubernetes-validations", []).append(
                        {"message": message, "rule": rule}
                    )
                case markers.ListMap(keys):
                    schema["x-kubernetes-list-map-keys"] = list(keys)
                    schema["x-kubernetes-list-type"] = "map"
                case markers.ListType(kind):
                    schema["x-kubernetes-list-type"] = kind
                case markers.Atomic():
                    schema["x-kubernetes-map-type"] = "atomic"
                case markers.OpenAPI():
                    pass
                case _:
                    raise TypeError(f"unknown marker {m!r}")


_TYPE_META = {
    "apiVersion": {
        "description": "APIVersion defines the versioned schema of this representation of an object.",
        "type": "string",
    },
    "kind": {
        "description": "Kind is a string value representing the REST resource this object represents.",
        "type": "string",
    },
    "metadata": {"type": "object"},
}


def _root(builder: SchemaBuilder, td: Any, kind: str, description: str) -> Schema:
    schema = builder.object(td)
    schema["description"] = description
    schema["properties"].update(json.loads(json.dumps(_TYPE_META)))
    for rule in types.ROOT_RULES.get(kind, ()):
        schema.setdefault("x-kubernetes-validations", []).append(
            {"message": rule.message, "rule": rule.rule}
        )
    return schema


def _crd(
    builder: SchemaBuilder,
    of: Kind,
    td: Any,
    description: str,
    *,
    status: bool,
    columns: list[Schema] | None = None,
) -> Schema:
    """The CRD of kind ``of`` (names from the kind table) whose schema is the TypedDict ``td``."""
    group, _, version = of.api_version.rpartition("/")
    kind, plural = of.kind, of.plural
    schema = _root(builder, td, kind, description)
    ver: Schema = {}
    if columns:
        ver["additionalPrinterColumns"] = columns
    ver["name"] = version
    ver["schema"] = {"openAPIV3Schema": schema}
    ver["served"] = True
    ver["storage"] = True
    if status:
        ver["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": {"app.kubernetes.io/part-of": "kubetrain"},
        },
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": "Namespaced" if of.namespaced else "Cluster",
            "versions": [ver],
        },
    }


def build_crds(version: str = K8S_VERSION) -> list[Schema]:
    """The four CRDs, in a fixed order: TrainJob, TrainingRuntime, ClusterTrainingRuntime, JobSet."""
    b = SchemaBuilder(OpenAPIConverter(version))
    trainjob = _crd(
        b,
        kinds.TRAINJOB,
        types.TrainJob,
        "A training job: a runtime reference plus overrides.",
        status=True,
        # kubectl shows the type of the last condition as the job's state.
        columns=[
            {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
            {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        ],
    )
    runtime_doc = "A blueprint for TrainJobs: ML policy, gang-scheduling policy, JobSet template."
    training_runtime = _crd(
        b, kinds.TRAINING_RUNTIME, types.TrainingRuntime, runtime_doc, status=False
    )
    cluster_runtime = _crd(
        b, kinds.CLUSTER_TRAINING_RUNTIME, types.ClusterTrainingRuntime, runtime_doc, status=False
    )
    jobset = _crd(
        b,
        kinds.JOBSET,
        types.JobSet,
        "A group of Jobs run as one unit.",
        status=True,
        columns=[
            {
                "description": "Final state of JobSet",
                "jsonPath": ".status.terminalState",
                "name": "TerminalState",
                "type": "string",
            },
            {
                "description": "Number of restarts",
                "jsonPath": ".status.restarts",
                "name": "Restarts",
                "type": "string",
            },
            {
                "jsonPath": '.status.conditions[?(@.type=="Completed")].status',
                "name": "Completed",
                "type": "string",
            },
            {
                "description": "JobSet suspended",
                "jsonPath": ".spec.suspend",
                "name": "Suspended",
                "type": "string",
            },
            {
                "description": "Time this JobSet was created",
                "jsonPath": ".metadata.creationTimestamp",
                "name": "Age",
                "type": "date",
            },
        ],
    )
    return [trainjob, training_runtime, cluster_runtime, jobset]


def _strip_descriptions(x: Any) -> Any:
    if isinstance(x, dict):
        return {
            k: _strip_descriptions(v)
            for k, v in x.items()
            # "description" is a field *name* in some core types; only drop it as a schema keyword.
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(x, list):
        return [_strip_descriptions(i) for i in x]
    return x


HEADER = "# Generated by tools/gen_crds.py from kubetrain.api.types; do not edit.\n"


def render(crds: list[Schema]) -> dict[str, str]:
    """File name -> content."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    files: dict[str, str] = {}
    for crd in crds:
        spec = crd["spec"]
        name = f"{spec['group']}_{spec['names']['plural']}.yaml"
        files[name] = HEADER + yaml.dump(crd, Dumper=dumper, sort_keys=True, width=100)
    # The same CRDs without schema descriptions, compact: what the package reads at run time.
    compact = copy.deepcopy(crds)
    for crd in compact:
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            version["schema"]["openAPIV3Schema"] = _strip_descriptions(schema)
    files["crds.json"] = json.dumps(compact, separators=(",", ":")) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    return generator.main(
        argv, doc=__doc__, out=OUT, render=lambda: render(build_crds()), prune=True
    )


if __name__ == "__main__":
    raise SystemExit(main())
