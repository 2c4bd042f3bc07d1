"""RBAC as kube-apiserver decides it: who may do what, from Roles, ClusterRoles and their bindings.

Pure: `authorize(user, attributes, policy)` reads nothing but its arguments. The HTTP layer
turns each request into `Attributes` (`request_attributes`, kube-apiserver's request-info rules),
asks `authorize`, and answers a denial with `forbidden` (kube-apiserver's exact 403 text). The
access reviews (`access_review_answer`, `rules_review_answer`) ask the same function, so
``kubectl auth can-i`` says what a request would meet.

Rules follow ``k8s.io/kubernetes/pkg/apis/rbac/v1`` (RuleAllows): ``*`` for verbs, groups,
resources and non-resource URLs; ``*/sub`` matches a subresource of every resource; an empty
``resourceNames`` matches every name; a non-resource URL ending in ``*`` is a prefix.
Members of ``system:masters`` are allowed everything before RBAC is asked, as kube-apiserver's
privileged-group authorizer does. A ClusterRole with an ``aggregationRule`` holds the rules of
every ClusterRole its selectors match (what the clusterrole-aggregation controller writes).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.access import as_dict, as_list, obj_at
from kubetrain.local.apiserver.selectors import label_selector

__all__ = [
    "ADMIN",
    "GROUP",
    "MASTERS",
    "Attributes",
    "Decision",
    "Policy",
    "ReviewError",
    "User",
    "access_review_answer",
    "authorize",
    "bootstrap_policy",
    "escalation",
    "forbidden_message",
    "request_attributes",
    "rule_allows",
    "rules_review_answer",
    "user_from_info",
    "user_from_review",
    "user_info",
]

GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
_RBAC_V1 = f"{GROUP}/v1"
_AUTHZ_V1 = "authorization.k8s.io/v1"
# kube-apiserver escapes these in the forbidden message (it may end up in HTML).
_SANITISE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Subresources of a namespace that stay on the namespace itself (request-info rules).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "GET": "get", "HEAD": "get"}


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated identity (what a TokenReview's ``status.user`` says)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# The admin kubeconfig's user: a member of system:masters, as kind's and kubeadm's admin is.
ADMIN = User("kubernetes-admin", (MASTERS, AUTHENTICATED))


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request does: a verb on a resource (or on a non-resource path)."""

    verb: str
    resource: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    path: str = ""
    resource_request: bool = True

    def with_verb(self, verb: str) -> Attributes:
        """The same request with another verb (``dataclasses.replace`` costs several times more)."""
        return Attributes(
            verb, self.resource, self.api_group, self.api_version, self.namespace, self.name,
            self.subresource, self.path, self.resource_request,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Decision:
    """``reason`` is what kube-apiserver reports: ``RBAC: allowed by ...`` or the errors met."""

    allowed: bool
    reason: str = ""


# A binding's grant: where it comes from (for the reason), its rules (None: the role is
# missing) and the error to report then.
Grant = tuple[str, list[Mapping[str, Any]] | None, str]
Compiled = tuple[str, "list[_Rule] | None", str]
_GRANTS_CACHED = 1024


@dataclass(frozen=True)
class Policy:
    """The stored RBAC objects, indexed once per change (`Policy.build`).

    What a (user, namespace) is granted is worked out once per policy and kept (a policy is
    replaced, not changed, when an RBAC object changes), so a request pays a dictionary lookup
    and a walk over its own rules.
    """

    cluster_roles: Mapping[str, Mapping[str, Any]]
    roles: Mapping[tuple[str, str], Mapping[str, Any]]
    cluster_role_bindings: Sequence[Mapping[str, Any]]
    role_bindings: Mapping[str, Sequence[Mapping[str, Any]]]
    _rules: dict[str, list[Mapping[str, Any]] | None] = field(default_factory=dict, compare=False)
    _grants: dict[tuple[str, tuple[str, ...], str], list[Compiled]] = field(
        default_factory=dict, compare=False
    )

    def grants(self, user: User, namespace: str) -> list[Compiled]:
        key = (user.name, user.groups, namespace)
        found = self._grants.get(key)
        if found is None:
            if len(self._grants) >= _GRANTS_CACHED:
                self._grants.clear()
            found = self._grants[key] = [
                (source, None if rules is None else [_Rule.of(r) for r in rules], missing)
                for source, rules, missing in _grants(user, namespace, self)
            ]
        return found

    @classmethod
    def build(
        cls,
        cluster_roles: Iterable[Mapping[str, Any]] = (),
        roles: Iterable[Mapping[str, Any]] = (),
        cluster_role_bindings: Iterable[Mapping[str, Any]] = (),
        role_bindings: Iterable[Mapping[str, Any]] = (),
    ) -> Policy:
        by_namespace: dict[str, list[Mapping[str, Any]]] = {}
        for binding in role_bindings:
            by_namespace.setdefault(_meta(binding, "namespace"), []).append(binding)
        return cls(
            {_meta(r, "name"): r for r in cluster_roles},
            {(_meta(r, "namespace"), _meta(r, "name")): r for r in roles},
            list(cluster_role_bindings),
            by_namespace,
        )

    def cluster_role_rules(self, name: str) -> list[Mapping[str, Any]] | None:
        """The rules of a ClusterRole (aggregated ones included); None when it does not exist."""
        if name in self._rules:
            return self._rules[name]
        role = self.cluster_roles.get(name)
        rules: list[Mapping[str, Any]] | None = None
        if role is not None:
            rules = []
            self._collect(role, rules, set())
        self._rules[name] = rules
        return rules

    def _collect(
        self, role: Mapping[str, Any], into: list[Mapping[str, Any]], seen: set[str]
    ) -> None:
        name = _meta(role, "name")
        if name in seen:
            return
        seen.add(name)
        aggregation = obj_at(role, "aggregationRule")
        selectors = [
            label_selector(as_dict(s)) for s in as_list(aggregation.get("clusterRoleSelectors"))
        ]
        if not selectors:
            into.extend(as_dict(r) for r in as_list(role.get("rules")))
            return
        # The aggregation controller replaces the role's rules with those of the roles matched.
        for other_name in sorted(self.cluster_roles):
            other = self.cluster_roles[other_name]
            if other_name != name and any(s.matches(other) for s in selectors):
                self._collect(other, into, seen)


def _meta(obj: Mapping[str, Any], key: str) -> str:
    return str(obj_at(obj, "metadata").get(key) or "")


# -- request attributes ---------------------------------------------------------------------


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """kube-apiserver's RequestInfo for ``method path?query``, as authorisation sees it.

    ``/api/v1/...`` and ``/apis/<group>/<version>/...`` with a resource are resource requests;
    everything else (discovery, ``/version``, ``/openapi/...``) is a non-resource request whose
    verb is the lower-cased HTTP method.
    """
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis") or (parts[0] == "apis" and len(parts) < 4):
        return Attributes(verb=method.lower(), path=path, resource_request=False)
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _VERBS.get(method.upper(), method.lower())
    if method.upper() == "DELETE":
        verb = "delete"
    if rest and rest[0] == "watch":
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "").lower() in ("true", "1") else "list"
    if not name and verb in ("list", "watch"):
        # A list pinned to one name by a field selector is a request about that name.
        for term in (query.get("fieldSelector") or "").split(","):
            key, _, value = term.partition("=")
            if key.strip() == "metadata.name" and value and not value.startswith("="):
                name = value.strip()
            elif key.strip() == "metadata.name" and value.startswith("="):
                name = value[1:].strip()
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        verb=verb,
        resource=resource,
        api_group=group,
        api_version=version,
        namespace=namespace,
        name=name,
        subresource=subresource,
        path=path,
    )


# -- the decision ------------------------------------------------------------------------------


def _matches(values: Iterable[Any], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


@dataclass(frozen=True, slots=True)
class _Rule:
    """A PolicyRule as sets, matched without re-reading the object."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: tuple[str, ...]

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> _Rule:
        def strings(key: str) -> frozenset[str]:
            return frozenset(str(v) for v in as_list(rule.get(key)))

        urls = tuple(str(u) for u in as_list(rule.get("nonResourceURLs")))
        return cls(
            strings("verbs"),
            strings("apiGroups"),
            strings("resources"),
            strings("resourceNames"),
            urls,
        )

    def allows(self, attributes: Attributes) -> bool:
        verbs = self.verbs
        if "*" not in verbs and attributes.verb not in verbs:
            return False
        if not attributes.resource_request:
            path = attributes.path
            return any(
                url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*")))
                for url in self.urls
            )
        if "*" not in self.groups and attributes.api_group not in self.groups:
            return False
        resources = self.resources
        if "*" not in resources:
            sub = attributes.subresource
            combined = f"{attributes.resource}/{sub}" if sub else attributes.resource
            if combined not in resources and not (sub and "*/" + sub in resources):
                return False
        return not self.names or attributes.name in self.names


def rule_allows(attributes: Attributes, rule: Mapping[str, Any]) -> bool:
    """Whether one PolicyRule covers the request."""
    return _Rule.of(rule).allows(attributes)


def _applies(user: User, subject: Mapping[str, Any], namespace: str) -> bool:
    kind = subject.get("kind")
    name = str(subject.get("name") or "")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = str(subject.get("namespace") or namespace)
        return bool(sa_namespace) and user.name == f"system:serviceaccount:{sa_namespace}:{name}"
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or namespace}"'
    return f'{kind} "{name}"'


def _grants(user: User, namespace: str, policy: Policy) -> Iterator[Grant]:
    """(source, rules or None when the role is missing, missing-role error) of each binding of
    ``user``: ClusterRoleBindings first, then RoleBindings in ``namespace``."""
    for binding in policy.cluster_role_bindings:
        ref = obj_at(binding, "roleRef")
        for subject in as_list(binding.get("subjects")):
            subject = as_dict(subject)
            if _applies(user, subject, ""):
                role = str(ref.get("name") or "")
                source = (
                    f'ClusterRoleBinding "{_meta(binding, "name")}" of ClusterRole "{role}" '
                    f"to {_describe_subject(subject, '')}"
                )
                missing = f'clusterrole.{GROUP} "{role}" not found'
                yield source, policy.cluster_role_rules(role), missing
                break
    if not namespace:
        return
    for binding in policy.role_bindings.get(namespace, ()):
        ref = obj_at(binding, "roleRef")
        for subject in as_list(binding.get("subjects")):
            subject = as_dict(subject)
            if _applies(user, subject, namespace):
                kind, role = str(ref.get("kind") or ""), str(ref.get("name") or "")
                source = (
                    f'RoleBinding "{_meta(binding, "name")}/{namespace}" of {kind} "{role}" '
                    f"to {_describe_subject(subject, namespace)}"
                )
                if kind == "ClusterRole":
                    rules = policy.cluster_role_rules(role)
                    missing = f'clusterrole.{GROUP} "{role}" not found'
                else:
                    found = policy.roles.get((namespace, role))
                    rules = (
                        [as_dict(r) for r in as_list(found.get("rules"))]
                        if found is not None
                        else None
                    )
                    missing = f'role.{GROUP} "{role}" not found'
                yield source, rules, missing
                break


def authorize(user: User, attributes: Attributes, policy: Policy) -> Decision:
    """Allowed, and by what; or denied, with the RBAC errors met on the way (missing roles)."""
    if MASTERS in user.groups:
        return Decision(True)
    errors: list[str] = []
    for source, rules, missing in policy.grants(user, attributes.namespace):
        if rules is None:
            errors.append(missing)
            continue
        for rule in rules:
            if rule.allows(attributes):
                return Decision(True, f"RBAC: allowed by {source}")
    if not errors:
        return Decision(False)
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return Decision(False, f"RBAC: {text}")


def forbidden_message(user: User, attributes: Attributes, reason: str = "") -> str:
    """kube-apiserver's text for a refused request (responsewriters.Forbidden)."""
    if not attributes.resource_request:
        text = f'User "{user.name}" cannot {attributes.verb} path "{attributes.path}"'
    else:
        resource = attributes.resource
        if attributes.subresource:
            resource += "/" + attributes.subresource
        where = (
            f'in the namespace "{attributes.namespace}"'
            if attributes.namespace
            else "at the cluster scope"
        )
        text = (
            f'User "{user.name}" cannot {attributes.verb} resource "{resource}" '
            f'in API group "{attributes.api_group}" {where}'
        )
    text = text.translate(_SANITISE)
    if reason:
        text = f"{text}: {reason}"
    if not attributes.resource_request or not attributes.resource:
        return f"forbidden: {text}"
    qualified = attributes.resource + (f".{attributes.api_group}" if attributes.api_group else "")
    if attributes.name:
        return f'{qualified} "{attributes.name}" is forbidden: {text}'
    return f"{qualified} is forbidden: {text}"


# -- escalation ---------------------------------------------------------------------------------


def _atoms(rule: Mapping[str, Any]) -> Iterator[tuple[tuple[str, str, str, str], Attributes]]:
    """One request per (group, resource, name, verb) or (url, verb) a rule grants; ``*`` stays
    literal, so only a ``*`` the user holds covers it (rbac's BreakdownRule and Covers)."""
    verbs = [str(v) for v in as_list(rule.get("verbs"))]
    for url in as_list(rule.get("nonResourceURLs")):
        for verb in verbs:
            yield (
                ("", "", "", str(url)),
                Attributes(verb=verb, path=str(url), resource_request=False),
            )
    for group in as_list(rule.get("apiGroups")):
        for resource in as_list(rule.get("resources")):
            name_list = [str(n) for n in as_list(rule.get("resourceNames"))] or [""]
            base, _, sub = str(resource).partition("/")
            for name in name_list:
                for verb in verbs:
                    yield (
                        (str(group), str(resource), name, ""),
                        Attributes(
                            verb=verb,
                            resource=base,
                            subresource=sub,
                            api_group=str(group),
                            name=name,
                        ),
                    )


def _compact(missing: list[tuple[tuple[str, str, str, str], str]]) -> list[str]:
    """The missing permissions as kube-apiserver prints them (CompactString, verbs merged)."""
    verbs: dict[tuple[str, str, str, str], list[str]] = {}
    for key, verb in missing:
        verbs.setdefault(key, []).append(verb)

    def quoted(values: Sequence[str]) -> str:
        return "[" + " ".join(json.dumps(v) for v in values) + "]"

    lines = []
    for (group, resource, name, url), vs in sorted(verbs.items()):
        if url:
            lines.append(f"{{NonResourceURLs:{quoted([url])}, Verbs:{quoted(vs)}}}")
            continue
        parts = [f"APIGroups:{quoted([group])}", f"Resources:{quoted([resource])}"]
        if name:
            parts.append(f"ResourceNames:{quoted([name])}")
        parts.append(f"Verbs:{quoted(vs)}")
        lines.append("{" + ", ".join(parts) + "}")
    return sorted(lines)  # kube-apiserver sorts the rules by their text


def escalation(user: User, obj: Mapping[str, Any], policy: Policy) -> str | None:
    """Why writing this Role, ClusterRole or binding would grant more than ``user`` holds
    (kube-apiserver's escalation check), or None when it may: the user holds every permission,
    or the ``escalate`` verb on the role (``bind`` on the role a binding names)."""
    if MASTERS in user.groups:
        return None
    kind = str(obj.get("kind") or "")
    meta = obj_at(obj, "metadata")
    namespace = str(meta.get("namespace") or "") if kind in ("Role", "RoleBinding") else ""
    rules: list[Mapping[str, Any]] | None
    if kind in ("Role", "ClusterRole"):
        plural = "roles" if kind == "Role" else "clusterroles"
        name = str(meta.get("name") or "")
        rules = [as_dict(r) for r in as_list(obj.get("rules"))]
        verb = "escalate"
    elif kind in ("RoleBinding", "ClusterRoleBinding"):
        ref = obj_at(obj, "roleRef")
        plural = "roles" if ref.get("kind") == "Role" else "clusterroles"
        name = str(ref.get("name") or "")
        if plural == "roles":
            found = policy.roles.get((namespace, name))
            rules = None if found is None else [as_dict(r) for r in as_list(found.get("rules"))]
        else:
            rules = policy.cluster_role_rules(name)
        verb = "bind"
    else:
        return None
    special = Attributes(
        verb=verb, resource=plural, api_group=GROUP, namespace=namespace, name=name
    )
    if authorize(user, special, policy).allowed:
        return None
    missing = []
    for rule in rules or ():
        for key, attrs in _atoms(rule):
            attrs = dataclasses.replace(attrs, namespace=namespace)
            if not authorize(user, attrs, policy).allowed:
                missing.append((key, attrs.verb))
    if not missing:
        return None
    groups = "[" + " ".join(json.dumps(g) for g in user.groups) + "]"
    return (
        f"user {json.dumps(user.name)} (groups={groups}) is attempting to grant RBAC permissions "
        "not currently held:\n" + "\n".join(_compact(missing))
    )


# -- access reviews ----------------------------------------------------------------------------


class ReviewError(ValueError):
    """A review body that cannot be answered; the text names the field."""


def _attributes_from_spec(spec: Mapping[str, Any], namespace: str | None) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        raise ReviewError(
            'spec.resourceAttributes: Invalid value: "null": exactly one of '
            "nonResourceAttributes or resourceAttributes must be specified"
        )
    if non_resource is not None:
        attrs = as_dict(non_resource)
        return Attributes(
            verb=str(attrs.get("verb") or ""),
            path=str(attrs.get("path") or ""),
            resource_request=False,
        )
    attrs = as_dict(resource)
    ns = str(attrs.get("namespace") or "")
    if namespace is not None and ns != namespace:
        raise ReviewError(
            f'spec.resourceAttributes.namespace: Invalid value: "{ns}": must match metadata.namespace'
        )
    return Attributes(
        verb=str(attrs.get("verb") or ""),
        resource=str(attrs.get("resource") or ""),
        api_group=str(attrs.get("group") or ""),
        api_version=str(attrs.get("version") or ""),
        namespace=ns,
        name=str(attrs.get("name") or ""),
        subresource=str(attrs.get("subresource") or ""),
    )


def user_info(user: User) -> dict[str, Any]:
    """``user`` as an ``authentication.k8s.io/v1`` UserInfo, empty fields left out.

    The one spelling of the identity on the wire: audit Events' ``user`` and AdmissionReviews'
    ``request.userInfo`` carry it; `user_from_info` reads it back.
    """
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra.items()}
    return info


def user_from_info(info: Mapping[str, Any] | None) -> User | None:
    """The user of a UserInfo (a TokenReview's ``status.user``, an audit Event's ``user``).

    None for no user (no ``username``).
    """
    if not info or not info.get("username"):
        return None
    return _user_of(info, "username")


def user_from_review(spec: Mapping[str, Any]) -> User:
    """The user a SubjectAccessReview asks about."""
    return _user_of(spec, "user")


def _user_of(obj: Mapping[str, Any], name_key: str) -> User:
    """UserInfo and SubjectAccessReview spec spell the same fields but for the name's key."""
    extra = {str(k): tuple(str(v) for v in as_list(vs)) for k, vs in obj_at(obj, "extra").items()}
    return User(
        str(obj.get(name_key) or ""),
        tuple(str(g) for g in as_list(obj.get("groups"))),
        str(obj.get("uid") or ""),
        extra,
    )


def access_review_answer(
    kind: str, body: Any, requester: User, policy: Policy, namespace: str | None = None
) -> dict[str, Any]:
    """The answer to a SelfSubjectAccessReview, SubjectAccessReview or LocalSubjectAccessReview.

    ``requester`` is who sent a SelfSubjectAccessReview (the subject); the other two name theirs
    in ``spec``. ``namespace`` is the URL's, for a LocalSubjectAccessReview. Raises `ReviewError`.
    """
    if not isinstance(body, dict):
        raise ReviewError(f"the body must be an {_AUTHZ_V1} {kind}")
    spec = obj_at(body, "spec")
    attributes = _attributes_from_spec(spec, namespace)
    if kind == "SelfSubjectAccessReview":
        subject = requester
    else:
        subject = user_from_review(spec)
        if not subject.name and not subject.groups:
            raise ReviewError(
                'spec.user: Invalid value: "": at least one of user or group must be specified'
            )
    decision = authorize(subject, attributes, policy)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    metadata = {"creationTimestamp": None}
    if namespace is not None:
        metadata["namespace"] = namespace  # type: ignore[assignment]  # a string beside the None
    return {
        "kind": kind,
        "apiVersion": _AUTHZ_V1,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }


def rules_review_answer(body: Any, requester: User, policy: Policy) -> dict[str, Any]:
    """The answer to a SelfSubjectRulesReview (``kubectl auth can-i --list``)."""
    if not isinstance(body, dict):
        raise ReviewError(f"the body must be an {_AUTHZ_V1} SelfSubjectRulesReview")
    spec = obj_at(body, "spec")
    namespace = str(spec.get("namespace") or "")
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    errors: list[str] = []
    if MASTERS in requester.groups:
        resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
        non_resource_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
    for _source, rules, missing in _grants(requester, namespace, policy):
        if rules is None:
            errors.append(missing)
            continue
        for rule in rules:
            if rule.get("nonResourceURLs"):
                non_resource_rules.append(
                    {
                        "verbs": list(as_list(rule.get("verbs"))),
                        "nonResourceURLs": list(as_list(rule.get("nonResourceURLs"))),
                    }
                )
            else:
                entry = {
                    k: list(as_list(rule.get(k)))
                    for k in ("verbs", "apiGroups", "resources", "resourceNames")
                    if rule.get(k)
                }
                resource_rules.append(entry)
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": bool(errors),
    }
    if errors:
        status["evaluationError"] = ", ".join(errors)
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": _AUTHZ_V1,
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


# -- bootstrap policy --------------------------------------------------------------------------


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources}


_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
# What kube-apiserver's view/edit/admin roles grant, trimmed to the kinds this server serves.
_VIEW_RULES = [
    _rule(_READ, [""], ["configmaps", "endpoints", "events", "pods", "pods/log", "pods/status",
                        "serviceaccounts", "services", "services/status", "limitranges"]),
    _rule(_READ, [""], ["namespaces", "namespaces/status"]),
    _rule(_READ, ["apps"], ["deployments", "deployments/status", "replicasets", "replicasets/status",
                            "statefulsets", "daemonsets"]),
    _rule(_READ, ["batch"], ["jobs", "jobs/status", "cronjobs"]),
    _rule(_READ, ["events.k8s.io"], ["events"]),
    _rule(_READ, ["coordination.k8s.io"], ["leases"]),
]  # fmt: skip
_EDIT_RULES = [
    _rule(_WRITE, [""], ["configmaps", "endpoints", "pods", "secrets", "serviceaccounts", "services"]),
    _rule(["create"], [""], ["pods/exec", "pods/attach", "pods/portforward", "serviceaccounts/token"]),
    _rule(_READ, [""], ["secrets"]),
    _rule(_WRITE, ["apps"], ["deployments", "deployments/scale", "replicasets", "statefulsets", "daemonsets"]),
    _rule(_WRITE, ["batch"], ["jobs", "cronjobs"]),
    _rule(_WRITE, ["coordination.k8s.io"], ["leases"]),
]  # fmt: skip
_ADMIN_RULES = [
    _rule([*_READ, *_WRITE], [GROUP], ["roles", "rolebindings"]),
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
]
_DISCOVERY_URLS = [
    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
    "/readyz", "/version", "/version/",
]  # fmt: skip
_PUBLIC_INFO_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def _cluster_role(
    name: str,
    rules: list[dict[str, Any]],
    labels: Mapping[str, str] | None = None,
    aggregate_from: Sequence[str] = (),
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    }
    role: dict[str, Any] = {"apiVersion": _RBAC_V1, "kind": "ClusterRole", "metadata": meta}
    if aggregate_from:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [
                {"matchLabels": {f"{GROUP}/aggregate-to-{target}": "true"}}
                for target in aggregate_from
            ]
        }
    role["rules"] = rules
    return role


def _cluster_binding(name: str, role: str, groups: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": _RBAC_V1,
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> list[dict[str, Any]]:
    """The ClusterRoles and bindings kube-apiserver creates at start that matter here.

    cluster-admin (bound to system:masters), system:discovery, system:basic-user (the access
    reviews) and system:public-info-viewer, and admin/edit/view built by aggregation from the
    ``system:aggregate-to-*`` roles, as on a cluster (their rules trimmed to the kinds served).
    """
    aggregate = f"{GROUP}/aggregate-to-"
    return [
        _cluster_role(
            "cluster-admin",
            [
                _rule(["*"], ["*"], ["*"]),
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ],
        ),
        _cluster_role("system:discovery", [{"verbs": ["get"], "nonResourceURLs": _DISCOVERY_URLS}]),
        _cluster_role(
            "system:basic-user",
            [
                _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
            ],
        ),
        _cluster_role("system:public-info-viewer", [{"verbs": ["get"], "nonResourceURLs": _PUBLIC_INFO_URLS}]),
        _cluster_role("admin", [], aggregate_from=["admin"]),
        _cluster_role("edit", [], {f"{aggregate}admin": "true"}, aggregate_from=["edit"]),
        _cluster_role(
            "view", [], {f"{aggregate}admin": "true", f"{aggregate}edit": "true"}, aggregate_from=["view"]
        ),
        _cluster_role("system:aggregate-to-admin", _ADMIN_RULES, {f"{aggregate}admin": "true"}),
        _cluster_role("system:aggregate-to-edit", _EDIT_RULES, {f"{aggregate}edit": "true"}),
        _cluster_role("system:aggregate-to-view", _VIEW_RULES, {f"{aggregate}view": "true"}),
        _cluster_binding("cluster-admin", "cluster-admin", [MASTERS]),
        _cluster_binding("system:discovery", "system:discovery", [AUTHENTICATED]),
        _cluster_binding("system:basic-user", "system:basic-user", [AUTHENTICATED]),
        _cluster_binding(
            "system:public-info-viewer", "system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]
        ),
    ]  # fmt: skip
