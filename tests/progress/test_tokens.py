"""Service-account tokens of the local engine: minted and reviewed as kube-apiserver does it."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.tokens import (
    ISSUER,
    BoundPod,
    Refusal,
    TokenError,
    load_or_create_key,
    mint,
    token_request_answer,
    token_review_answer,
    verify,
)

KEY = b"k" * 32
NOW = 1_800_000_000
AUD = "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"


class Store:
    """A stand-in for the API server's object reader."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {
            (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects
        }

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace or "", name))


def pod(
    name: str = "job-node-0-0", uid: str = "pod-uid", sa: str = "default", **meta: Any
) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, **meta},
        "spec": {"serviceAccountName": sa},
    }


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def request(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def a_token(**overrides: Any) -> str:
    """A token minted with ``KEY`` at ``NOW`` for ``ns/default`` and ``AUD``, but for
    ``overrides``."""
    args: dict[str, Any] = {"namespace": "ns", "service_account": "default", "audiences": [AUD]}
    return mint(KEY, **{**args, "now": NOW, **overrides})


def review(token: str, *audiences: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def test_minted_token_carries_kubernetes_claims_and_verifies() -> None:
    token = a_token(pod=BoundPod("p", "u1"), service_account_uid="sa-uid")
    claims = claims_of(token)
    assert claims["iss"] == ISSUER
    assert claims["sub"] == "system:serviceaccount:ns:default"
    assert claims["aud"] == [AUD]
    assert (claims["iat"], claims["nbf"], claims["exp"]) == (NOW, NOW, NOW + 3600)
    assert claims["kubernetes.io"] == {
        "namespace": "ns",
        "serviceaccount": {"name": "default", "uid": "sa-uid"},
        "pod": {"name": "p", "uid": "u1"},
    }
    got = verify(KEY, token, now=NOW + 10)
    assert (got.username, got.audiences, got.pod) == (
        "system:serviceaccount:ns:default",
        (AUD,),
        BoundPod("p", "u1"),
    )


def _tampered(token: str) -> str:
    header, _payload, sig = token.split(".")
    claims = claims_of(token)
    claims["kubernetes.io"]["namespace"] = "other"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{sig}"


@pytest.mark.parametrize(
    ("make", "now", "reason"),
    [
        pytest.param(lambda t: t, NOW + 3600, "expired", id="expired at exp"),
        pytest.param(lambda t: t, NOW - 1, "not valid yet", id="used before nbf"),
        pytest.param(_tampered, NOW, "signature", id="claims changed after signing"),
        pytest.param(lambda t: t + "x", NOW, "signature", id="signature changed"),
        pytest.param(lambda t: "not-a-jwt", NOW, "not a JWT", id="not a JWT at all"),
        pytest.param(
            lambda t: mint(
                b"other" * 8, namespace="ns", service_account="default", audiences=[AUD], now=NOW
            ),
            NOW,
            "signature",
            id="signed with another home's key",
        ),
        pytest.param(
            lambda t: a_token(service_account="d", issuer="x"),
            NOW,
            "someone else",
            id="another issuer",
        ),
    ],
)
def test_bad_tokens_do_not_verify(make: Any, now: int, reason: str) -> None:
    token = make(a_token())
    with pytest.raises(TokenError, match=reason):
        verify(KEY, token, now=now)


def test_key_is_created_private_once_and_reused(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path)
    assert len(key) == 32
    assert load_or_create_key(tmp_path) == key
    assert stat.S_IMODE((tmp_path / "serviceaccount.key").stat().st_mode) == 0o600


def test_token_request_answer_binds_the_pod_and_fills_defaults() -> None:
    answer = token_request_answer(
        KEY,
        Store(pod()),
        namespace="ns",
        service_account="default",
        body=request(audiences=[AUD], boundObjectRef={"kind": "Pod", "name": "job-node-0-0"}),
        now=NOW,
    )
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["expirationSeconds"] == 3600
    assert answer["spec"]["boundObjectRef"]["uid"] == "pod-uid"
    assert answer["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"  # NOW + 3600 s
    claims = claims_of(answer["status"]["token"])
    assert claims["kubernetes.io"]["pod"] == {"name": "job-node-0-0", "uid": "pod-uid"}


def test_token_request_without_audience_is_for_the_api_server() -> None:
    answer = token_request_answer(
        KEY, Store(), namespace="ns", service_account="default", body=request(), now=NOW
    )
    assert claims_of(answer["status"]["token"])["aud"] == [ISSUER]


@pytest.mark.parametrize(
    ("service_account", "body", "code"),
    [
        pytest.param("builder", request(), 404, id="unknown service account"),
        pytest.param("default", request(expirationSeconds=599), 422, id="shorter than ten minutes"),
        pytest.param(
            "default",
            request(boundObjectRef={"kind": "Pod", "name": "gone"}),
            404,
            id="bound pod missing",
        ),
        pytest.param(
            "default",
            request(boundObjectRef={"kind": "Pod", "name": "job-node-0-0", "uid": "old"}),
            409,
            id="bound pod recreated since",
        ),
        pytest.param(
            "default",
            request(boundObjectRef={"kind": "Secret", "name": "s"}),
            422,
            id="binding to a Secret",
        ),
        pytest.param("default", {"kind": "TokenReview"}, 400, id="another kind of body"),
        pytest.param("default", request(audiences="api"), 400, id="audiences not a list"),
    ],
)
def test_token_request_refusals(service_account: str, body: Any, code: int) -> None:
    with pytest.raises(Refusal) as refused:
        token_request_answer(
            KEY, Store(pod()), namespace="ns", service_account=service_account, body=body, now=NOW
        )
    assert refused.value.code == code
    assert refused.value.status()["code"] == code


def test_token_request_for_a_pod_of_another_service_account_is_refused() -> None:
    with pytest.raises(Refusal, match="runs as service account"):
        token_request_answer(
            KEY,
            Store(
                pod(sa="builder"),
                {
                    "kind": "ServiceAccount",
                    "metadata": {"name": "builder", "namespace": "ns", "uid": "b"},
                },
            ),
            namespace="ns",
            service_account="default",
            body=request(boundObjectRef={"kind": "Pod", "name": "job-node-0-0"}),
            now=NOW,
        )


def test_review_accepts_a_bound_token_for_its_audience() -> None:
    store = Store(pod())
    token = a_token(pod=BoundPod("job-node-0-0", "pod-uid"))
    answer = token_review_answer(KEY, store, body=review(token, AUD, "other"), now=NOW + 1)
    status = answer["status"]
    assert status["authenticated"] is True
    assert status["audiences"] == [AUD]
    assert status["user"]["username"] == "system:serviceaccount:ns:default"
    assert "system:serviceaccounts:ns" in status["user"]["groups"]
    assert status["user"]["extra"]["authentication.kubernetes.io/pod-name"] == ["job-node-0-0"]


@pytest.mark.parametrize(
    ("store", "audiences", "error"),
    [
        pytest.param(
            Store(pod()),
            ("trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/other/status",),
            "audiences",
            id="another job's audience",
        ),
        pytest.param(
            Store(pod()), (), "audiences", id="no audience asked: must be the API server's"
        ),
        pytest.param(Store(), (AUD,), "deleted", id="bound pod deleted"),
        pytest.param(
            Store(pod(uid="new")), (AUD,), "deleted", id="bound pod replaced by a namesake"
        ),
        pytest.param(
            Store(pod(deletionTimestamp="2020-01-01T00:00:00Z")),
            (AUD,),
            "being deleted",
            id="bound pod terminating",
        ),
    ],
)
def test_review_refuses(store: Store, audiences: tuple[str, ...], error: str) -> None:
    token = a_token(pod=BoundPod("job-node-0-0", "pod-uid"))
    status = token_review_answer(KEY, store, body=review(token, *audiences), now=NOW + 1)["status"]
    assert status["authenticated"] is False
    assert error in status["error"]


def test_review_refuses_a_token_whose_service_account_was_recreated() -> None:
    sa = {
        "kind": "ServiceAccount",
        "metadata": {"name": "builder", "namespace": "ns", "uid": "new"},
    }
    token = a_token(service_account="builder", service_account_uid="old")
    status = token_review_answer(KEY, Store(sa), body=review(token, AUD), now=NOW + 1)["status"]
    assert status["authenticated"] is False
