"""Stored CustomResourceDefinitions (``apiextensions.k8s.io/v1``).

An operator installs kubetrain with ``kubectl apply --server-side -k manifests/``, whose first
objects are the Trainer and JobSet CRDs. The server stores them with the apiextensions server's
name check and status, so the apply succeeds and ``kubectl wait --for condition=established``
answers. The kinds it serves come from its own table (``resources``), not from stored CRDs: a CRD
for a kind the table serves is Established; one for any other kind is stored but not served, and
its Established condition says so instead of pretending.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.access import as_dict, as_list, obj_at
from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver.resources import Registry

__all__ = ["crd_errors", "crd_status", "is_crd"]

GROUP = "apiextensions.k8s.io"


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


def crd_status(crd: dict[str, Any], registry: Registry, when: str) -> dict[str, Any]:
    """The status the apiextensions controllers would settle on, stamped at once."""
    spec = obj_at(crd, "spec")
    names = obj_at(spec, "names")
    storage = next(
        (
            str(v.get("name"))
            for v in map(as_dict, as_list(spec.get("versions")))
            if v.get("storage")
        ),
        "",
    )
    accepted: dict[str, Any] = {
        "plural": names["plural"],
        "singular": names.get("singular") or str(names["kind"]).lower(),
        "kind": names["kind"],
        "listKind": names.get("listKind") or f"{names['kind']}List",
    }
    for key in ("shortNames", "categories"):
        if names.get(key):
            accepted[key] = list(names[key])
    served = registry.get(str(spec["group"]), storage, str(names["plural"]))
    if served is not None and served.kind == names["kind"]:
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
