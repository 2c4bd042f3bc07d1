"""ObjectMeta rules every Kubernetes object follows: name, label and annotation syntax and
size. The embedded API server enforces them on every write; the CLI checks a file's
documents with them before it sends any (``apply -f``, ``validate``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubetrain.api.errors import FieldError

__all__ = ["MAX_ANNOTATIONS_BYTES", "document_errors", "validate_metadata"]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def _check_name(name: Any, dns_label: bool) -> list[FieldError]:
    if not isinstance(name, str):
        return [FieldError("metadata.name", f"{name!r}: must be a string")]
    if dns_label:
        if len(name) > 63:
            return [FieldError("metadata.name", f'"{name}": must be no more than 63 characters')]
        if not _LABEL.match(name):
            return [FieldError("metadata.name", f'"{name}": {_LABEL_MSG}')]
    else:
        if len(name) > 253:
            return [FieldError("metadata.name", f'"{name}": must be no more than 253 characters')]
        if not _SUBDOMAIN.match(name):
            return [FieldError("metadata.name", f'"{name}": {_SUBDOMAIN_MSG}')]
    return []


def _check_label_key(path: str, key: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return [FieldError(path, f'"{key}": prefix part {_SUBDOMAIN_MSG}')]
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return [
            FieldError(
                path,
                f"\"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character, and be no more than 63 characters",
            )
        ]
    return []


# kube-apiserver's limit on the total size of an object's annotations (keys and values).
MAX_ANNOTATIONS_BYTES = 256 * 1024


def validate_metadata(
    meta: Mapping[str, Any], dns_label: bool, check_name: bool = True
) -> list[FieldError]:
    """Name format, label syntax, and string-valued labels and annotations."""
    errors: list[FieldError] = []
    if check_name:
        errors += _check_name(meta.get("name"), dns_label)
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            errors.append(FieldError("metadata.labels", "must be a map of strings"))
        else:
            for key, value in labels.items():
                errors += _check_label_key("metadata.labels", key)
                if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
                    errors.append(
                        FieldError(
                            "metadata.labels",
                            f"{value!r}: a valid label must be an empty string or consist of alphanumeric characters, "
                            "'-', '_' or '.', and must start and end with an alphanumeric character",
                        )
                    )
    annotations = meta.get("annotations")
    if annotations is not None and (
        not isinstance(annotations, Mapping)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        errors.append(FieldError("metadata.annotations", "must be a map of strings"))
    elif annotations:
        for key in annotations:
            errors += _check_label_key("metadata.annotations", str(key))
        size = sum(len(str(k).encode()) + len(v.encode()) for k, v in annotations.items())
        if size > MAX_ANNOTATIONS_BYTES:
            errors.append(
                FieldError(
                    "metadata.annotations",
                    f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes",
                    "TooLong",
                )
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        errors.append(FieldError("metadata.finalizers", "must be a list of strings"))
    return errors


def document_errors(obj: Any) -> list[FieldError]:
    """What the API server would refuse in any document before looking at its kind's rules:
    the type fields, a name (or generateName), and ``validate_metadata``."""
    if not isinstance(obj, Mapping):
        return [FieldError("", "a document must be a mapping (an object)")]
    errors = [
        FieldError(key, "Required value", "Required")
        for key in ("apiVersion", "kind")
        if not isinstance(obj.get(key), str) or not obj.get(key)
    ]
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [
            *errors,
            FieldError(
                "metadata.name", "Required value: name or generateName is required", "Required"
            ),
        ]
    has_name = meta.get("name") not in (None, "")
    if not has_name and not meta.get("generateName"):
        errors.append(
            FieldError(
                "metadata.name", "Required value: name or generateName is required", "Required"
            )
        )
    kind = obj.get("kind")
    return errors + validate_metadata(
        meta,
        dns_label=kind == "Namespace" and "/" not in str(obj.get("apiVersion")),
        check_name=has_name,
    )
