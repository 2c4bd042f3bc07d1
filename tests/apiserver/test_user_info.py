"""The authenticated user on the wire: one UserInfo spelling for audit Events and AdmissionReviews.

``rbac.user_info`` writes it (empty fields left out, as kube-apiserver's JSON omits them) and
``rbac.user_from_info`` reads it back; the audit log and the webhook dispatcher both use them.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.apiserver.rbac import User, user_from_info, user_info
from kubetrain.local.apiserver.resources import BUILTIN_RESOURCES
from kubetrain.local.apiserver.webhooks import AdmissionAttributes, review_request

_SA = "system:serviceaccount:team-a:trainer"
_POD_NAME = "authentication.kubernetes.io/pod-name"

CASES = [
    pytest.param(User("alice"), {"username": "alice"}, id="a bare user is its name alone"),
    pytest.param(
        User(_SA, ("system:serviceaccounts", "system:authenticated"), "u-1"),
        {
            "username": _SA,
            "uid": "u-1",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
        id="a service account carries its uid and groups",
    ),
    pytest.param(
        User("bob", (), "", {_POD_NAME: ("p-0",)}),
        {"username": "bob", "extra": {_POD_NAME: ["p-0"]}},
        id="extra values become lists and empty fields stay out",
    ),
]


@pytest.mark.parametrize(("user", "wire"), CASES)
def test_user_info_is_the_wire_userinfo_and_reads_back(user: User, wire: dict[str, Any]) -> None:
    assert user_info(user) == wire
    assert user_from_info(wire) == user


@pytest.mark.parametrize(("user", "wire"), [*CASES, pytest.param(None, {"username": ""})])
def test_an_admission_review_carries_the_same_userinfo(
    user: User | None, wire: dict[str, Any]
) -> None:
    pods = next(r for r in BUILTIN_RESOURCES if r.plural == "pods")
    attrs = AdmissionAttributes("CREATE", pods, "", "team-a", "p", {}, None, user=user)
    assert review_request(attrs, "uid-1")["request"]["userInfo"] == wire
