"""RBAC as kube-apiserver decides it: the pure rules, then the server enforcing them."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubetrain.local.apiserver import ApiServer, protobuf
from kubetrain.local.apiserver.audit import DECISION, REASON, read_events, request_of
from kubetrain.local.apiserver.rbac import (
    ADMIN,
    Attributes,
    Policy,
    User,
    access_review_answer,
    authorize,
    bootstrap_policy,
    escalation,
    forbidden_message,
    request_attributes,
    user_from_info,
)
from kubetrain.local.tokens import TokenAuthority

RBAC = "rbac.authorization.k8s.io/v1"
SA = User(
    "system:serviceaccount:team:trainer",
    ("system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"),
)
ALICE = User("alice", ("system:authenticated", "ml-engineers"))
BOB = User("bob", ("system:authenticated",))


def _role(
    kind: str, name: str, rules: list[dict[str, Any]], namespace: str = "", **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules, **extra}


def _binding(
    kind: str,
    name: str,
    role_kind: str,
    role: str,
    subjects: list[dict[str, Any]],
    namespace: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def _rule(
    verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None
) -> dict[str, Any]:
    rule: dict[str, Any] = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        rule["resourceNames"] = names
    return rule


def _policy() -> Policy:
    objects = [
        *bootstrap_policy(),
        _role(
            "ClusterRole",
            "trainjob-reader",
            [_rule(["get", "list", "watch"], ["trainer.kubeflow.org"], ["trainjobs"])],
        ),
        _role(
            "ClusterRole",
            "status-writer",
            [_rule(["patch"], ["trainer.kubeflow.org"], ["trainjobs/status"])],
        ),
        _role("ClusterRole", "any-status", [_rule(["get"], ["*"], ["*/status"])]),
        _role(
            "ClusterRole",
            "metrics",
            [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]}],
        ),
        _role(
            "ClusterRole",
            "trainer-aggregate",
            [],
            aggregationRule={
                "clusterRoleSelectors": [
                    {"matchLabels": {"example.com/aggregate-to-trainer": "true"}}
                ]
            },
        ),
        _role(
            "ClusterRole",
            "jobsets-for-trainer",
            [_rule(["create"], ["jobset.x-k8s.io"], ["jobsets"])],
            metadata={"labels": {"example.com/aggregate-to-trainer": "true"}},
        ),
        _role(
            "Role",
            "lease",
            [_rule(["get", "update"], ["coordination.k8s.io"], ["leases"], ["trainer-lock"])],
            "team",
        ),
        _role("Role", "everything", [_rule(["*"], ["*"], ["*"])], "sandbox"),
        _binding(
            "ClusterRoleBinding",
            "readers",
            "ClusterRole",
            "trainjob-reader",
            [{"kind": "Group", "name": "ml-engineers"}],
        ),
        _binding(
            "ClusterRoleBinding",
            "trainer-status",
            "ClusterRole",
            "status-writer",
            [{"kind": "ServiceAccount", "name": "trainer", "namespace": "team"}],
        ),
        _binding(
            "ClusterRoleBinding",
            "trainer-agg",
            "ClusterRole",
            "trainer-aggregate",
            [{"kind": "ServiceAccount", "name": "trainer", "namespace": "team"}],
        ),
        _binding(
            "ClusterRoleBinding",
            "bob-metrics",
            "ClusterRole",
            "metrics",
            [{"kind": "User", "name": "bob"}],
        ),
        _binding(
            "ClusterRoleBinding",
            "bob-status",
            "ClusterRole",
            "any-status",
            [{"kind": "User", "name": "bob"}],
        ),
        # The namespace of a ServiceAccount subject defaults to the RoleBinding's.
        _binding(
            "RoleBinding",
            "lease",
            "Role",
            "lease",
            [{"kind": "ServiceAccount", "name": "trainer"}],
            "team",
        ),
        _binding(
            "RoleBinding",
            "alice-edit",
            "ClusterRole",
            "edit",
            [{"kind": "User", "name": "alice"}],
            "team",
        ),
        _binding(
            "RoleBinding",
            "alice-all",
            "Role",
            "everything",
            [{"kind": "User", "name": "alice"}],
            "sandbox",
        ),
        _binding(
            "RoleBinding", "dangling", "Role", "gone", [{"kind": "User", "name": "bob"}], "team"
        ),
        _binding(
            "ClusterRoleBinding",
            "dangling-cluster",
            "ClusterRole",
            "gone-too",
            [{"kind": "User", "name": "bob"}],
        ),
    ]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    return Policy.build(
        by_kind.get("ClusterRole", []),
        by_kind.get("Role", []),
        by_kind.get("ClusterRoleBinding", []),
        by_kind.get("RoleBinding", []),
    )


def _res(
    verb: str, resource: str, group: str = "", namespace: str = "", name: str = "", sub: str = ""
) -> Attributes:
    return Attributes(
        verb=verb,
        resource=resource,
        api_group=group,
        namespace=namespace,
        name=name,
        subresource=sub,
    )


def _path(verb: str, path: str) -> Attributes:
    return Attributes(verb=verb, path=path, resource_request=False)


T = "trainer.kubeflow.org"
CASES = [
    ("system:masters may do anything", ADMIN, _res("delete", "secrets", namespace="x", name="y"), True, ""),
    ("a group binding grants its members", ALICE, _res("list", "trainjobs", T), True,
     'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "trainjob-reader" to Group "ml-engineers"'),
    ("a verb the rule lacks is refused", ALICE, _res("delete", "trainjobs", T, "team", "j"), False, ""),
    ("the API group must match", ALICE, _res("list", "trainjobs", "other.example.com"), False, ""),
    ("a resource does not grant its subresources", SA, _res("patch", "trainjobs", T, "team", "j"), False, ""),
    ("resource/subresource is granted as written", SA, _res("patch", "trainjobs", T, "team", "j", "status"), True,
     'RBAC: allowed by ClusterRoleBinding "trainer-status" of ClusterRole "status-writer" to ServiceAccount "trainer/team"'),
    ("*/status matches the status of every resource", BOB, _res("get", "pods", "", "a", "p", "status"), True,
     'RBAC: allowed by ClusterRoleBinding "bob-status" of ClusterRole "any-status" to User "bob"'),
    ("*/status does not match the resource itself", BOB, _res("get", "pods", "", "a", "p"), False,
     '[clusterrole.rbac.authorization.k8s.io "gone-too" not found]'),
    ("resourceNames admit the named object", SA, _res("update", "leases", "coordination.k8s.io", "team", "trainer-lock"), True,
     'RBAC: allowed by RoleBinding "lease/team" of Role "lease" to ServiceAccount "trainer/team"'),
    ("resourceNames refuse other names", SA, _res("update", "leases", "coordination.k8s.io", "team", "other"), False, ""),
    ("resourceNames refuse a list (no name)", SA, _res("list", "leases", "coordination.k8s.io", "team"), False, ""),
    ("a RoleBinding grants in its namespace only", SA, _res("get", "leases", "coordination.k8s.io", "other", "trainer-lock"), False, ""),
    ("a RoleBinding grants nothing cluster-wide", ALICE, _res("list", "pods"), False, ""),
    ("a RoleBinding to a ClusterRole grants it in the namespace", ALICE, _res("create", "pods", "", "team"), True,
     'RBAC: allowed by RoleBinding "alice-edit/team" of ClusterRole "edit" to User "alice"'),
    ("aggregation: edit holds view's rules", ALICE, _res("list", "services", "", "team"), True,
     'RBAC: allowed by RoleBinding "alice-edit/team" of ClusterRole "edit" to User "alice"'),
    ("aggregation: edit grants no RBAC writes (admin does)", ALICE, _res("create", "rolebindings", "rbac.authorization.k8s.io", "team"), False, ""),
    ("aggregation from a custom label selector", SA, _res("create", "jobsets", "jobset.x-k8s.io", "team"), True,
     'RBAC: allowed by ClusterRoleBinding "trainer-agg" of ClusterRole "trainer-aggregate" to ServiceAccount "trainer/team"'),
    ("* in verbs, groups and resources", ALICE, _res("deletecollection", "anything", "any.group", "sandbox"), True,
     'RBAC: allowed by RoleBinding "alice-all/sandbox" of Role "everything" to User "alice"'),
    ("non-resource URL matched exactly", BOB, _path("get", "/metrics"), True,
     'RBAC: allowed by ClusterRoleBinding "bob-metrics" of ClusterRole "metrics" to User "bob"'),
    ("non-resource URL matched by a trailing *", BOB, _path("get", "/debug/pprof/heap"), True,
     'RBAC: allowed by ClusterRoleBinding "bob-metrics" of ClusterRole "metrics" to User "bob"'),
    ("non-resource URL with another verb", BOB, _path("post", "/metrics"), False,
     '[clusterrole.rbac.authorization.k8s.io "gone-too" not found]'),
    ("every authenticated user may discover the API", SA, _path("get", "/apis/trainer.kubeflow.org/v1alpha1"), True,
     'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"'),
    ("every authenticated user may ask what they may do", SA,
     _res("create", "selfsubjectaccessreviews", "authorization.k8s.io"), True,
     'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated"'),
    ("a binding to a missing role is reported", BOB, _res("get", "secrets", "", "team", "s"), False,
     'RBAC: [clusterrole.rbac.authorization.k8s.io "gone-too" not found, role.rbac.authorization.k8s.io "gone" not found]'),
    ("a service account of another namespace is someone else", User("system:serviceaccount:other:trainer", ("system:authenticated",)),
     _res("patch", "trainjobs", T, "team", "j", "status"), False, ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("user", "attributes", "allowed", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_authorize(user: User, attributes: Attributes, allowed: bool, reason: str) -> None:
    decision = authorize(user, attributes, _policy())
    assert decision.allowed is allowed
    if allowed or reason.startswith("RBAC"):
        assert decision.reason == reason
    elif reason:
        assert decision.reason.endswith(reason.strip("[]"))


ATTRIBUTE_CASES = [
    ("a named GET is get", "GET", "/api/v1/namespaces/team/pods/p", {}, _res("get", "pods", "", "team", "p")),
    ("a collection GET is list", "GET", "/apis/trainer.kubeflow.org/v1alpha1/trainjobs", {}, _res("list", "trainjobs", T)),
    ("?watch=true is watch", "GET", "/api/v1/namespaces/team/pods", {"watch": "true"}, _res("watch", "pods", "", "team")),
    ("/watch/ paths are watch", "GET", "/api/v1/watch/namespaces/team/pods", {}, _res("watch", "pods", "", "team")),
    ("a metadata.name field selector names the object", "GET", "/api/v1/namespaces/team/configmaps",
     {"fieldSelector": "metadata.name=cfg"}, _res("list", "configmaps", "", "team", "cfg")),
    ("POST is create", "POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets", {}, _res("create", "jobsets", "jobset.x-k8s.io", "team")),
    ("PATCH of a subresource", "PATCH", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/j/status", {},
     _res("patch", "trainjobs", T, "team", "j", "status")),
    ("PUT is update", "PUT", "/apis/coordination.k8s.io/v1/namespaces/team/leases/l", {}, _res("update", "leases", "coordination.k8s.io", "team", "l")),
    ("a collection DELETE is deletecollection", "DELETE", "/api/v1/namespaces/team/pods", {}, _res("deletecollection", "pods", "", "team")),
    ("a namespace is in its own namespace", "GET", "/api/v1/namespaces/team", {}, _res("get", "namespaces", "", "team", "team")),
    ("a namespace's status subresource", "PUT", "/api/v1/namespaces/team/status", {}, _res("update", "namespaces", "", "team", "team", "status")),
    ("TokenRequest is create serviceaccounts/token", "POST", "/api/v1/namespaces/team/serviceaccounts/sa/token", {},
     _res("create", "serviceaccounts", "", "team", "sa", "token")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [c[1:] for c in ATTRIBUTE_CASES],
    ids=[c[0] for c in ATTRIBUTE_CASES],
)
def test_request_attributes(
    method: str, path: str, query: dict[str, str], expected: Attributes
) -> None:
    got = request_attributes(method, path, query)
    assert (got.verb, got.resource, got.api_group, got.namespace, got.name, got.subresource) == (
        expected.verb, expected.resource, expected.api_group, expected.namespace, expected.name, expected.subresource,
    )  # fmt: skip
    assert got.resource_request


@pytest.mark.parametrize(
    "path",
    ["/api", "/api/v1", "/apis", "/apis/trainer.kubeflow.org/v1alpha1", "/version", "/openapi/v3"],
)
def test_discovery_and_version_are_non_resource_requests(path: str) -> None:
    got = request_attributes("GET", path, {})
    assert (got.resource_request, got.verb, got.path) == (False, "get", path)


MESSAGES = [
    ("namespaced create", SA, _res("create", "trainjobs", T, "team"), "",
     'trainjobs.trainer.kubeflow.org is forbidden: User "system:serviceaccount:team:trainer" cannot create '
     'resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace "team"'),
    ("a named core object", SA, _res("get", "secrets", "", "team", "s"), "",
     'secrets "s" is forbidden: User "system:serviceaccount:team:trainer" cannot get resource "secrets" '
     'in API group "" in the namespace "team"'),
    ("a cluster-scoped subresource, with the RBAC reason", BOB, _res("update", "namespaces", "", "", "n", "finalize"),
     'RBAC: role.rbac.authorization.k8s.io "gone" not found',
     'namespaces "n" is forbidden: User "bob" cannot update resource "namespaces/finalize" in API group "" '
     'at the cluster scope: RBAC: role.rbac.authorization.k8s.io "gone" not found'),
    ("a path", BOB, _path("get", "/logs/<x>"), "", 'forbidden: User "bob" cannot get path "/logs/&lt;x&gt;"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("user", "attributes", "reason", "message"),
    [c[1:] for c in MESSAGES],
    ids=[c[0] for c in MESSAGES],
)
def test_forbidden_message_is_kube_apiservers(
    user: User, attributes: Attributes, reason: str, message: str
) -> None:
    assert forbidden_message(user, attributes, reason) == message


def test_a_subject_access_review_asks_about_someone_else() -> None:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:team:trainer",
            "groups": ["system:authenticated"],
            "resourceAttributes": {"verb": "get", "resource": "leases", "group": "coordination.k8s.io",
                                   "namespace": "team", "name": "trainer-lock"},
        },
    }  # fmt: skip
    answer = access_review_answer("SubjectAccessReview", body, ADMIN, _policy())
    assert answer["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "lease/team" of Role "lease" to ServiceAccount "trainer/team"',
    }


# -- the server enforcing it ---------------------------------------------------------------------


@pytest.fixture
async def server(tmp_path: Path) -> Any:
    authority = TokenAuthority.for_home(tmp_path, protobuf=protobuf.decode)
    server = ApiServer(
        tmp_path,
        in_memory=True,
        routes=authority.routes(),
        authenticator=lambda token: user_from_info(authority.authenticate(token)),
    )
    authority.attach(server.reader)
    await server.start()
    yield server
    await server.close()


async def _call(
    server: ApiServer, token: str, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    import ssl

    context = ssl.create_default_context(cadata=(server.ca_pem or b"").decode())
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession(server.url, headers=headers) as http,
        http.request(method, path, json=body, ssl=context) as response,
    ):
        return response.status, await response.json(content_type=None)


async def _service_account_token(server: ApiServer, namespace: str, name: str) -> str:
    assert server.token
    code, _ = await _call(server, server.token, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                          {"metadata": {"name": name}})  # fmt: skip
    assert code == 201
    code, answer = await _call(
        server, server.token, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )  # fmt: skip
    assert code == 201, answer
    return str(answer["status"]["token"])


async def test_a_service_account_gets_what_its_bindings_grant_and_the_403_otherwise(
    server: ApiServer,
) -> None:
    token = await _service_account_token(server, "default", "trainer")
    code, status = await _call(server, token, "GET", "/api/v1/namespaces/default/configmaps")
    assert code == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps is forbidden: User "system:serviceaccount:default:trainer" cannot list resource '
        '"configmaps" in API group "" in the namespace "default"'
    )
    assert status["details"] == {"kind": "configmaps"}
    assert server.token
    for path, obj in [
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
         _role("Role", "read-cm", [_rule(["list"], [""], ["configmaps"])], "default")),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
         _binding("RoleBinding", "read-cm", "Role", "read-cm", [{"kind": "ServiceAccount", "name": "trainer"}], "default")),
    ]:  # fmt: skip
        code, answer = await _call(server, server.token, "POST", path, obj)
        assert code == 201, answer
    code, listed = await _call(server, token, "GET", "/api/v1/namespaces/default/configmaps")
    assert (code, listed["kind"]) == (200, "ConfigMapList")
    code, _ = await _call(server, token, "GET", "/api/v1/namespaces/kube-system/configmaps")
    assert code == 403
    code, review = await _call(
        server, token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
         "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": "default"}}},
    )  # fmt: skip
    assert code == 201
    assert review["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "read-cm/default" of Role "read-cm" to ServiceAccount "trainer/default"',
    }
    # Allowed to create Roles, it still cannot grant what it does not hold.
    code, answer = await _call(
        server, server.token, "PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/read-cm",
        _role("Role", "read-cm", [_rule(["list"], [""], ["configmaps"]), _rule(["create"], ["rbac.authorization.k8s.io"], ["roles"])], "default"),
    )  # fmt: skip
    assert code == 200, answer
    code, status = await _call(
        server, token, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        _role("Role", "sneaky", [_rule(["get"], [""], ["secrets"])], "default"),
    )  # fmt: skip
    assert code == 403
    assert status["message"] == (
        'roles.rbac.authorization.k8s.io "sneaky" is forbidden: user "system:serviceaccount:default:trainer" '
        '(groups=["system:serviceaccounts" "system:serviceaccounts:default" "system:authenticated"]) is attempting '
        'to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}'
    )


async def test_a_token_for_another_audience_is_not_the_api_servers(server: ApiServer) -> None:
    assert server.token
    await _service_account_token(server, "default", "other")
    code, answer = await _call(
        server, server.token, "POST", "/api/v1/namespaces/default/serviceaccounts/other/token",
        {"kind": "TokenRequest", "spec": {"audiences": ["kubetrain-status-server"]}},
    )  # fmt: skip
    assert code == 201
    code, _ = await _call(server, answer["status"]["token"], "GET", "/api/v1/namespaces")
    assert code == 401


async def test_the_bootstrap_roles_are_stored_objects(server: ApiServer) -> None:
    assert server.token
    code, listed = await _call(
        server, server.token, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    )
    assert code == 200
    names = {item["metadata"]["name"]: item["subjects"] for item in listed["items"]}
    assert names["cluster-admin"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}
    ]


async def test_kubectl_create_token_and_auth_can_i(server: ApiServer, tmp_path: Path) -> None:
    import shutil

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    admin_config = server.write_kubeconfig(tmp_path / "admin.kubeconfig")

    async def kubectl(config: Path, *args: str) -> tuple[int, str]:
        # kubectl runs beside the loop that serves it.
        done = await asyncio.to_thread(
            subprocess.run,
            ["kubectl", *args], env={**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.returncode, (done.stdout + done.stderr).strip()

    assert (await kubectl(admin_config, "create", "serviceaccount", "viewer"))[0] == 0
    code, token = await kubectl(admin_config, "create", "token", "viewer")
    assert code == 0, token
    config = server.kubeconfig()
    config["users"][0]["user"] = {"token": token}
    viewer = tmp_path / "viewer.kubeconfig"
    viewer.write_text(yaml.safe_dump(config))
    assert await kubectl(viewer, "get", "pods") == (
        1,
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:default:viewer" '
        'cannot list resource "pods" in API group "" in the namespace "default"',
    )
    code, out = await kubectl(admin_config, "create", "rolebinding", "viewer", "--clusterrole=view",
                              "--serviceaccount=default:viewer")  # fmt: skip
    assert code == 0, out
    assert await kubectl(viewer, "auth", "can-i", "list", "pods") == (0, "yes")
    assert await kubectl(viewer, "auth", "can-i", "delete", "pods") == (1, "no")
    assert await kubectl(viewer, "auth", "can-i", "list", "pods", "-n", "kube-system") == (1, "no")
    code, listed = await kubectl(viewer, "auth", "can-i", "--list")
    assert code == 0 and "selfsubjectaccessreviews.authorization.k8s.io" in listed, listed
    assert (await kubectl(viewer, "get", "pods"))[0] == 0


BINDER = User("binder", ("system:authenticated",))
ESCALATOR = User("escalator", ("system:authenticated",))


def _escalation_policy() -> Policy:
    base = _policy()
    extra_roles = [
        _role("ClusterRole", "may-bind-admin", [_rule(["bind"], ["rbac.authorization.k8s.io"], ["clusterroles"], ["admin"])]),
        _role("ClusterRole", "may-escalate", [_rule(["escalate", "create"], ["rbac.authorization.k8s.io"], ["roles"])]),
    ]  # fmt: skip
    extra_bindings = [
        _binding("ClusterRoleBinding", "binder", "ClusterRole", "may-bind-admin", [{"kind": "User", "name": "binder"}]),
        _binding("ClusterRoleBinding", "escalator", "ClusterRole", "may-escalate", [{"kind": "User", "name": "escalator"}]),
    ]  # fmt: skip
    return Policy.build(
        [*base.cluster_roles.values(), *extra_roles],
        base.roles.values(),
        [*base.cluster_role_bindings, *extra_bindings],
        [b for bs in base.role_bindings.values() for b in bs],
    )


ESCALATIONS = [
    ("a Role granting what its author holds", ALICE,
     _role("Role", "r", [_rule(["create", "delete"], [""], ["pods"])], "team"), None),
    ("a Role granting more than its author holds", ALICE,
     _role("Role", "r", [_rule(["create"], [""], ["pods"]), _rule(["create", "list"], ["rbac.authorization.k8s.io"], ["rolebindings"])], "team"),
     'user "alice" (groups=["system:authenticated" "ml-engineers"]) is attempting to grant RBAC permissions '
     'not currently held:\n{APIGroups:["rbac.authorization.k8s.io"], Resources:["rolebindings"], Verbs:["create" "list"]}'),
    ("the same Role where its author holds nothing", ALICE,
     _role("Role", "r", [_rule(["create"], [""], ["pods"])], "elsewhere"),
     'user "alice" (groups=["system:authenticated" "ml-engineers"]) is attempting to grant RBAC permissions '
     'not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["create"]}'),
    ("* is granted only by *", ALICE,
     _role("Role", "r", [_rule(["*"], [""], ["pods"])], "team"),
     'user "alice" (groups=["system:authenticated" "ml-engineers"]) is attempting to grant RBAC permissions '
     'not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["*"]}'),
    ("binding a ClusterRole its author holds in the namespace", ALICE,
     _binding("RoleBinding", "b", "ClusterRole", "view", [{"kind": "User", "name": "bob"}], "team"), None),
    ("binding cluster-admin", ALICE,
     _binding("ClusterRoleBinding", "b", "ClusterRole", "cluster-admin", [{"kind": "User", "name": "alice"}]),
     'user "alice" (groups=["system:authenticated" "ml-engineers"]) is attempting to grant RBAC permissions '
     'not currently held:\n{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}'),
    ("the bind verb on the role allows binding it", BINDER,
     _binding("RoleBinding", "b", "ClusterRole", "admin", [{"kind": "User", "name": "bob"}], "team"), None),
    ("the escalate verb allows writing any Role", ESCALATOR,
     _role("Role", "r", [_rule(["*"], ["*"], ["*"])], "team"), None),
    ("system:masters may grant anything", ADMIN,
     _binding("ClusterRoleBinding", "b", "ClusterRole", "cluster-admin", [{"kind": "User", "name": "x"}]), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("user", "obj", "expected"), [c[1:] for c in ESCALATIONS], ids=[c[0] for c in ESCALATIONS]
)
def test_rbac_objects_grant_no_more_than_their_author_holds(
    user: User, obj: dict[str, Any], expected: str | None
) -> None:
    assert escalation(user, obj, _escalation_policy()) == expected


async def test_the_audit_log_holds_what_rbac_decided_and_reads_back(tmp_path: Path) -> None:
    authority = TokenAuthority.for_home(tmp_path, protobuf=protobuf.decode)
    log = tmp_path / "audit" / "audit.log"
    server = ApiServer(
        tmp_path,
        in_memory=True,
        routes=authority.routes(),
        authenticator=lambda token: user_from_info(authority.authenticate(token)),
        audit_log=log,
    )
    authority.attach(server.reader)
    await server.start()
    try:
        token = await _service_account_token(server, "default", "trainer")
        code, _ = await _call(server, token, "GET", "/api/v1/namespaces/default/configmaps/x")
        assert code == 403
        code, _ = await _call(server, token, "GET", "/version")  # public: nobody authorises it
        code, _ = await _call(server, token, "GET", "/apis")
        assert code == 200
    finally:
        await server.close()
    events = list(read_events(log))
    # The admin's requests (system:masters) never reach RBAC, so only the ServiceAccount's are here.
    assert [(e["verb"], e["requestURI"], e["annotations"][DECISION]) for e in events] == [
        ("get", "/api/v1/namespaces/default/configmaps/x", "forbid"),
        ("get", "/apis", "allow"),
    ]
    forbidden = events[0]
    assert {k: forbidden[k] for k in ("kind", "apiVersion", "level", "stage", "objectRef")} == {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "stage": "RequestReceived",
        "objectRef": {"resource": "configmaps", "namespace": "default", "name": "x",
                      "apiVersion": "v1"},
    }  # fmt: skip
    assert forbidden["user"]["username"] == "system:serviceaccount:default:trainer"
    assert events[1]["annotations"][REASON].startswith(
        'RBAC: allowed by ClusterRoleBinding "system:discovery"'
    )
    user, attributes, allowed = request_of(forbidden)
    assert (user.name, allowed) == ("system:serviceaccount:default:trainer", False)
    assert attributes == request_attributes("GET", "/api/v1/namespaces/default/configmaps/x", {})
    assert request_of(events[1])[1] == request_attributes("GET", "/apis", {})


async def test_an_apply_that_creates_needs_create_as_well_as_patch(server: ApiServer) -> None:
    import json
    import ssl

    token = await _service_account_token(server, "default", "applier")
    assert server.token
    grants = [_rule(["patch"], [""], ["configmaps"])]
    for method, path, obj in [
        ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
         _role("Role", "apply-cm", grants, "default")),
        ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
         _binding("RoleBinding", "apply-cm", "Role", "apply-cm", [{"kind": "ServiceAccount", "name": "applier"}], "default")),
        ("POST", "/api/v1/namespaces/default/configmaps",
         {"metadata": {"name": "existing"}, "data": {"a": "1"}}),
    ]:  # fmt: skip
        code, answer = await _call(server, server.token, method, path, obj)
        assert code == 201, answer

    async def apply(name: str) -> tuple[int, dict[str, Any]]:
        context = ssl.create_default_context(cadata=(server.ca_pem or b"").decode())
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"a": "2"},
        }
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/apply-patch+yaml",
        }
        async with (
            aiohttp.ClientSession(server.url, headers=headers) as http,
            http.patch(f"/api/v1/namespaces/default/configmaps/{name}?fieldManager=t&force=true",
                       data=json.dumps(body), ssl=context) as response,
        ):  # fmt: skip
            return response.status, await response.json(content_type=None)

    code, answer = await apply("existing")
    assert code == 200, answer
    code, status = await apply("new")
    assert (code, status.get("reason")) == (403, "Forbidden"), status
    assert status["message"].startswith('configmaps "new" is forbidden')
    grants.append(_rule(["create"], [""], ["configmaps"]))
    code, answer = await _call(
        server, server.token, "PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/apply-cm",
        _role("Role", "apply-cm", grants, "default"),
    )  # fmt: skip
    assert code == 200, answer
    code, answer = await apply("new")
    assert code == 201, answer
