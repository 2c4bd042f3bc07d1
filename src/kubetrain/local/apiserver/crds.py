"""Stored CustomResourceDefinitions (``apiextensions.k8s.io/v1``).

An operator installs kubetrain with ``kubectl apply --server-side -k manifests/``, whose first
objects are the Trainer and JobSet CRDs. The server stores them with the apiextensions server's
name check and status, so the apply succeeds and ``kubectl wait --for condition=established``
answers. The kinds it serves come from its own table (``resources``), not from stored CRDs: a CRD
for a kind the table serves is Established; one for any other kind is stored but not served, and
its Established condition says so instead of pretending.

Deleting a CRD takes its custom resources with it, as the apiextensions server's finalizer does:
every instance is deleted first (their dependents collected), and a CRD whose instances are still
held by finalizers stays ``Terminating`` with ``customresourcecleanup.apiextensions.k8s.io``
until the last one goes; meanwhile no instance may be created.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.access import as_dict, as_list, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver.resources import Registry, ResourceDef

__all__ = [
    "CLEANUP_FINALIZER",
    "crd_errors",
    "crd_name",
    "crd_status",
    "held_for_cleanup",
    "is_crd",
    "served_resource",
]

GROUP = "apiextensions.k8s.io"
# What the apiextensions server holds a deleted CRD with until its instances are gone.
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def is_crd(group: str, kind: str) -> bool:
    return group == GROUP and kind == "CustomResourceDefinition"


def crd_errors(crd: dict[str, Any]) -> list[FieldError]:
    """The apiextensions server's checks a kubectl user meets first, each naming its field."""
    spec = obj_at(crd, "spec")
    names = obj_at(spec, "names")
    errors: list[FieldError] = []
    for path, value in (
        ("spec.group", spec.get("group")),
        ("spec.names.plural", names.get("plural")),
        ("spec.names.kind", names.get("kind")),
    ):
        if not isinstance(value, str) or not value:
            errors.append(FieldError(path, "Required value", "Required"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            FieldError("spec.scope", 'supported values: "Cluster", "Namespaced"', "NotSupported")
        )
    versions = [as_dict(v) for v in as_list(spec.get("versions"))]
    if sum(1 for v in versions if v.get("storage") is True) != 1:
        errors.append(
            FieldError(
                "spec.versions",
                "must have exactly one version marked as storage version",
                "Invalid",
            )
        )
    if not errors:
        wanted = f"{names['plural']}.{spec['group']}"
        name = obj_at(crd, "metadata").get("name")
        if name != wanted:
            errors.append(
                FieldError(
                    "metadata.name",
                    f'must be spec.names.plural+"."+spec.group: "{wanted}"',
                    "Invalid",
                )
            )
    return errors


def crd_name(res: ResourceDef) -> str:
    """The name of the CRD that would define ``res``: ``<plural>.<group>``."""
    return f"{res.plural}.{res.group}"


def _storage_version(spec: dict[str, Any]) -> str:
    return next(
        (
            str(v.get("name"))
            for v in map(as_dict, as_list(spec.get("versions")))
            if v.get("storage")
        ),
        "",
    )


def served_resource(crd: dict[str, Any], registry: Registry) -> ResourceDef | None:
    """The kind this server serves for ``crd``; None when it is stored but not served."""
    spec = obj_at(crd, "spec")
    names = obj_at(spec, "names")
    served = registry.get(str(spec.get("group")), _storage_version(spec), str(names.get("plural")))
    return served if served is not None and served.kind == names.get("kind") else None


def held_for_cleanup(crd: dict[str, Any], when: str) -> dict[str, Any]:
    """``crd`` with the cleanup finalizer and its ``Terminating`` condition, to be deleted while
    instances remain (the deletion marks it)."""
    held = dict(crd)
    meta = held["metadata"] = dict(obj_at(crd, "metadata"))
    meta["finalizers"] = [*as_list(meta.get("finalizers")), CLEANUP_FINALIZER]
    status = held["status"] = dict(obj_at(crd, "status"))
    conditions = map(as_dict, as_list(status.get("conditions")))
    status["conditions"] = [c for c in conditions if c.get("type") != "Terminating"] + [
        {
            "type": "Terminating",
            "status": "True",
            "lastTransitionTime": when,
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
        }
    ]
    return held


def crd_status(crd: dict[str, Any], registry: Registry, when: str) -> dict[str, Any]:
    """The status the apiextensions controllers would settle on, stamped at once."""
    spec = obj_at(crd, "spec")
    names = obj_at(spec, "names")
    storage = _storage_version(spec)
    accepted: dict[str, Any] = {
        "plural": names["plural"],
        "singular": names.get("singular") or str(names["kind"]).lower(),
        "kind": names["kind"],
        "listKind": names.get("listKind") or f"{names['kind']}List",
    }
    for key in ("shortNames", "categories"):
        if names.get(key):
            accepted[key] = list(names[key])
    if served_resource(crd, registry) is not None:
        established = {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": when,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        }
    else:
        established = {
            "type": "Established",
            "status": "False",
            "lastTransitionTime": when,
            "reason": "NotServed",
            "message": (
                f"the local API server serves only its built-in kinds; "
                f"{names['kind']} in {spec['group']}/{storage} is stored but not served"
            ),
        }
    return {
        "acceptedNames": accepted,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": when,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            established,
        ],
        "storedVersions": [storage],
    }
