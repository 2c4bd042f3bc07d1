"""Just enough Kubernetes protobuf to read what kubectl sends.

kubectl 1.32+ sends the bodies of its typed ``create`` commands (``create namespace``,
``create configmap``, ``create secret``, ``create serviceaccount``) as protobuf, with no JSON
fallback. This decodes those few kinds into the JSON form the rest of the server works on.
The envelope is the ``k8s\\0`` magic followed by a ``runtime.Unknown`` whose ``raw`` holds the
object; field numbers are those of k8s.io/api's generated.proto files. Anything else → 415.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import obj_at

__all__ = ["MAGIC", "ProtobufError", "decode"]

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not one of the protobuf messages understood here."""


# A message is {field number: (json name, kind, sub-message)}; kinds: str, bytes (base64 in
# JSON), int, bool, msg, time, map (string → string), bmap (string → bytes), and "[]" + kind.
Message = dict[int, tuple[str, str, Any]]

_OWNER_REF: Message = {
    1: ("kind", "str", None),
    3: ("name", "str", None),
    4: ("uid", "str", None),
    5: ("apiVersion", "str", None),
    6: ("controller", "bool", None),
    7: ("blockOwnerDeletion", "bool", None),
}
_OBJECT_META: Message = {
    1: ("name", "str", None),
    2: ("generateName", "str", None),
    3: ("namespace", "str", None),
    5: ("uid", "str", None),
    6: ("resourceVersion", "str", None),
    7: ("generation", "int", None),
    8: ("creationTimestamp", "time", None),
    11: ("labels", "map", None),
    12: ("annotations", "map", None),
    13: ("ownerReferences", "[]msg", _OWNER_REF),
    14: ("finalizers", "[]str", None),
}
_OBJECT_REF: Message = {
    1: ("kind", "str", None),
    2: ("namespace", "str", None),
    3: ("name", "str", None),
    4: ("uid", "str", None),
    5: ("apiVersion", "str", None),
    6: ("resourceVersion", "str", None),
    7: ("fieldPath", "str", None),
}
_RESOURCE_ATTRIBUTES: Message = {
    1: ("namespace", "str", None),
    2: ("verb", "str", None),
    3: ("group", "str", None),
    4: ("version", "str", None),
    5: ("resource", "str", None),
    6: ("subresource", "str", None),
    7: ("name", "str", None),
}
_NON_RESOURCE_ATTRIBUTES: Message = {1: ("path", "str", None), 2: ("verb", "str", None)}
_POLICY_RULE: Message = {
    1: ("verbs", "[]str", None),
    2: ("apiGroups", "[]str", None),
    3: ("resources", "[]str", None),
    4: ("resourceNames", "[]str", None),
    5: ("nonResourceURLs", "[]str", None),
}
_SUBJECT: Message = {
    1: ("kind", "str", None),
    2: ("apiGroup", "str", None),
    3: ("name", "str", None),
    4: ("namespace", "str", None),
}
_ROLE_REF: Message = {
    1: ("apiGroup", "str", None),
    2: ("kind", "str", None),
    3: ("name", "str", None),
}
_LABEL_SELECTOR: Message = {
    1: ("matchLabels", "map", None),
    2: (
        "matchExpressions",
        "[]msg",
        {1: ("key", "str", None), 2: ("operator", "str", None), 3: ("values", "[]str", None)},
    ),
}
_BINDING: Message = {
    1: ("metadata", "msg", _OBJECT_META),
    2: ("subjects", "[]msg", _SUBJECT),
    3: ("roleRef", "msg", _ROLE_REF),
}
_RBAC = "rbac.authorization.k8s.io/v1"
_KINDS: dict[tuple[str, str], Message] = {
    # kubectl create role / clusterrole / rolebinding / clusterrolebinding.
    (_RBAC, "Role"): {1: ("metadata", "msg", _OBJECT_META), 2: ("rules", "[]msg", _POLICY_RULE)},
    (_RBAC, "ClusterRole"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("rules", "[]msg", _POLICY_RULE),
        3: ("aggregationRule", "msg", {1: ("clusterRoleSelectors", "[]msg", _LABEL_SELECTOR)}),
    },
    (_RBAC, "RoleBinding"): _BINDING,
    (_RBAC, "ClusterRoleBinding"): _BINDING,
    # kubectl create token.
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: (
            "spec",
            "msg",
            {
                1: ("audiences", "[]str", None),
                3: (
                    "boundObjectRef",
                    "msg",
                    {
                        1: ("kind", "str", None),
                        2: ("apiVersion", "str", None),
                        3: ("name", "str", None),
                        4: ("uid", "str", None),
                    },
                ),
                4: ("expirationSeconds", "int", None),
            },
        ),
    },
    # kubectl auth can-i (and can-i --list) send these.
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: (
            "spec",
            "msg",
            {
                1: ("resourceAttributes", "msg", _RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", "msg", _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("spec", "msg", {1: ("namespace", "str", None)}),
    },
    ("v1", "Namespace"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("spec", "msg", {1: ("finalizers", "[]str", None)}),
    },
    ("v1", "ConfigMap"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("data", "map", None),
        3: ("binaryData", "bmap", None),
        4: ("immutable", "bool", None),
    },
    ("v1", "Secret"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("data", "bmap", None),
        3: ("type", "str", None),
        4: ("stringData", "map", None),
        5: ("immutable", "bool", None),
    },
    ("v1", "ServiceAccount"): {
        1: ("metadata", "msg", _OBJECT_META),
        2: ("secrets", "[]msg", _OBJECT_REF),
        3: ("imagePullSecrets", "[]msg", {1: ("name", "str", None)}),
        4: ("automountServiceAccountToken", "bool", None),
    },
}
_UNKNOWN: Message = {
    1: ("typeMeta", "msg", {1: ("apiVersion", "str", None), 2: ("kind", "str", None)}),
    2: ("raw", "raw", None),
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) triples; values are ints or bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value = data[pos : pos + size]
            pos += size
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _time(data: bytes) -> str | None:
    seconds = next((v for n, _, v in _fields(data) if n == 1), 0)
    if seconds <= 0 or seconds >= 1 << 63:
        return None  # Go's zero time (or none at all)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scalar(kind: str, value: Any, sub: Any) -> Any:
    if kind == "str":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "bool":
        return bool(value)
    if kind == "time":
        return _time(bytes(value))
    if kind == "msg":
        return _message(bytes(value), sub)
    if kind == "raw":
        return bytes(value)
    raise ProtobufError(f"unknown field kind {kind}")


def _message(data: bytes, spec: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in _fields(data):
        if number not in spec:
            continue  # a field this server does not keep
        name, kind, sub = spec[number]
        if kind in ("map", "bmap"):
            entry = {n: v for n, _, v in _fields(bytes(value))}
            key = bytes(entry.get(1, b"")).decode()
            raw = bytes(entry.get(2, b""))
            out.setdefault(name, {})[key] = (
                raw.decode() if kind == "map" else base64.b64encode(raw).decode()
            )
        elif kind.startswith("[]"):
            out.setdefault(name, []).append(_scalar(kind[2:], value, sub))
        else:
            decoded = _scalar(kind, value, sub)
            # Go writes every non-pointer field; its JSON would omit the empty ones, and so do we.
            if decoded not in ("", 0, None) or kind == "bool":
                out[name] = decoded
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or ``ProtobufError``."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic")
    envelope = _message(body[len(MAGIC) :], _UNKNOWN)
    type_meta = obj_at(envelope, "typeMeta")
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    spec = _KINDS.get((api_version, kind))
    if spec is None:
        raise ProtobufError(f"{api_version}/{kind} is not accepted as protobuf here")
    obj = _message(envelope.get("raw", b""), spec)
    return {"apiVersion": api_version, "kind": kind, **obj}
