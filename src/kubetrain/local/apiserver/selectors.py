"""Label and field selectors, parsed once per request and matched against stored objects."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api.access import as_dict, as_list, dicts, obj_at
from kubetrain.local.apiserver.errors import bad_request

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "label_selector",
    "parse_field_selector",
    "parse_label_selector",
    "selector_text",
]

_LABEL_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" also match objects without the label, as in Kubernetes.
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All requirements must hold (the comma means AND)."""

    requirements: tuple[_Requirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if not self.requirements:
            return True
        labels = obj_at(obj, "metadata", "labels")
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_label_selector(text: str | None) -> LabelSelector:
    """``a=b,c!=d,e in (x, y),f notin (z),g,!h`` → a selector; 400 on syntax errors."""
    if not text or not text.strip():
        return LabelSelector()
    tokens = _LABEL_TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise bad_request(f"unable to parse requirement: invalid label selector: {text!r}")
    reqs: list[_Requirement] = []
    i = 0

    def fail() -> Exception:
        return bad_request(
            f"unable to parse requirement: found unexpected token in label selector {text!r}"
        )

    while i < len(tokens):
        tok = tokens[i]
        if tok == "!":
            if i + 1 >= len(tokens):
                raise fail()
            reqs.append(_Requirement(tokens[i + 1], "!"))
            i += 2
        else:
            key = tok
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ","
            if nxt == ",":
                reqs.append(_Requirement(key, "exists"))
                i += 1
            elif nxt in ("=", "==", "!="):
                if i + 2 >= len(tokens) or tokens[i + 2] in (",", "(", ")"):
                    # ``a=`` selects the empty value.
                    reqs.append(_Requirement(key, "!=" if nxt == "!=" else "=", frozenset({""})))
                    i += 2
                else:
                    reqs.append(
                        _Requirement(key, "!=" if nxt == "!=" else "=", frozenset({tokens[i + 2]}))
                    )
                    i += 3
            elif nxt in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise fail()
                j = i + 3
                values: set[str] = set()
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] != ",":
                        values.add(tokens[j])
                    j += 1
                if j >= len(tokens):
                    raise fail()
                reqs.append(_Requirement(key, nxt, frozenset(values)))
                i = j + 1
            else:
                raise fail()
        if i < len(tokens):
            if tokens[i] != ",":
                raise fail()
            i += 1
    return LabelSelector(tuple(reqs))


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def label_selector(selector: Mapping[str, Any]) -> LabelSelector:
    """A metav1.LabelSelector (``matchLabels`` and ``matchExpressions``); empty matches everything.

    An operator Kubernetes does not know matches nothing (kube-apiserver refuses such selectors
    when they are written; one that got stored anyway must not widen what it selects).
    """
    reqs = [
        _Requirement(str(k), "=", frozenset({str(v)}))
        for k, v in obj_at(selector, "matchLabels").items()
    ]
    for expr in dicts(selector.get("matchExpressions")):
        op = _OPERATORS.get(str(expr.get("operator")))
        values = frozenset(str(v) for v in as_list(expr.get("values")))
        if op is None:
            reqs.append(_Requirement(str(expr.get("key")), "in", frozenset()))
        else:
            reqs.append(_Requirement(str(expr.get("key")), op, values))
    return LabelSelector(tuple(reqs))


def _lookup(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _event_source(obj: Mapping[str, Any]) -> str:
    return str(obj_at(obj, "source").get("component") or "")


_SPECIAL: dict[str, Callable[[Mapping[str, Any]], str]] = {"source": _event_source}


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """``metadata.name=x,status.phase!=Running``; only the labels the resource declares."""

    terms: tuple[tuple[str, bool, str], ...] = ()  # (field, equal?, value)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for fld, equal, value in self.terms:
            getter = _SPECIAL.get(fld)
            actual = getter(obj) if getter else _lookup(obj, fld)
            if (actual == value) != equal:
                return False
        return True

    def name(self) -> str | None:
        """The name an equality term pins, so a list can skip the scan."""
        for fld, equal, value in self.terms:
            if fld == "metadata.name" and equal:
                return value
        return None

    @property
    def empty(self) -> bool:
        return not self.terms


def parse_field_selector(text: str | None, allowed: tuple[str, ...], kind: str) -> FieldSelector:
    """Parse and check against ``metadata.name``, ``metadata.namespace`` and ``allowed``; 400 otherwise."""
    if not text or not text.strip():
        return FieldSelector()
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        fld, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if fld not in ("metadata.name", "metadata.namespace") and fld not in allowed:
            raise bad_request(f"field label not supported: {fld}")
        terms.append((fld, op != "!=", value))
    return FieldSelector(tuple(terms))


def selector_text(selector: Any) -> str:
    """A label selector as kubectl prints one: ``a=b,c in (d,e)``; ``<none>`` when empty."""
    if not isinstance(selector, Mapping) or not selector:
        return "<none>"
    labels = selector.get("matchLabels")
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        labels = selector  # a ReplicationController's selector is a plain map
    parts = [f"{k}={v}" for k, v in sorted(as_dict(labels).items())]
    words = {"In": "in", "NotIn": "notin"}
    for expr in dicts(selector.get("matchExpressions")):
        op, key, values = expr.get("operator"), expr.get("key"), as_list(expr.get("values"))
        if op in words:
            parts.append(f"{key} {words[op]} ({','.join(sorted(values))})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(sorted(parts)) or "<none>"
