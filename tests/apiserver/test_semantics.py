"""Kubernetes API semantics beyond the probes, each pinned with the official client."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml
from apiserver_support import TRAINER, Cluster, condition, kube_request, namespace_gone, trainjob
from kubernetes.client import ApiException

T = "/apis/trainer.kubeflow.org/v1alpha1"


def _names(listed: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in listed["items"]]


def test_a_no_op_patch_keeps_the_resource_version(tj_api: Any) -> None:
    created = tj_api("create", trainjob("same"))
    again = tj_api("patch", "same", {"spec": {"trainer": {"numNodes": 1}}})
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generation_counts_spec_changes_only(tj_api: Any) -> None:
    tj_api("create", trainjob("gen"))
    labelled = tj_api("patch", "gen", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    changed = tj_api("patch", "gen", {"spec": {"suspend": True}})
    assert changed["metadata"]["generation"] == 2


SDK_SELECTOR = (
    "jobset.sigs.k8s.io/jobset-name=job,jobset.sigs.k8s.io/replicatedjob-name in "
    "(dataset-initializer, model-initializer, launcher, node)"
)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("colour=red", ["red-big"]),
        ("colour==red", ["red-big"]),
        ("colour!=red", ["blue-small", "plain"]),
        ("colour in (red, blue)", ["blue-small", "red-big"]),
        ("colour notin (red)", ["blue-small", "plain"]),
        ("colour", ["blue-small", "red-big"]),
        ("!colour", ["plain"]),
        ("colour=blue,size=small", ["blue-small"]),
        (SDK_SELECTOR, ["red-big"]),
    ],
    ids=[
        "equality",
        "double equals",
        "inequality includes objects without the label",
        "set membership",
        "set exclusion includes objects without the label",
        "existence",
        "non-existence",
        "comma means and",
        "the Kubeflow SDK's step selector, spaces and all",
    ],
)
def test_label_selectors(core: Any, ns: str, selector: str, expected: list[str]) -> None:
    for name, labels in [
        (
            "red-big",
            {
                "colour": "red",
                "size": "big",
                "jobset.sigs.k8s.io/jobset-name": "job",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
            },
        ),
        ("blue-small", {"colour": "blue", "size": "small"}),
        ("plain", {}),
    ]:
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": labels}})
    assert (
        _names(core.list_namespaced_config_map(ns, label_selector=selector).to_dict()) == expected
    )


def test_field_selectors_and_an_unsupported_field(core: Any, ns: str) -> None:
    for name in ("a", "b"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    assert _names(
        core.list_namespaced_config_map(ns, field_selector="metadata.name!=a").to_dict()
    ) == ["b"]
    assert _names(
        core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns}").to_dict()
    ) == ["a", "b"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(ns, field_selector="data.x=1")
    assert err.value.status == 400


def test_event_field_selectors_on_the_involved_object(core: Any, ns: str) -> None:
    for name, target in [("e1", "job-a"), ("e2", "job-b")]:
        core.create_namespaced_event(
            ns,
            {
                "metadata": {"name": name},
                "involvedObject": {"kind": "TrainJob", "name": target, "namespace": ns},
                "reason": "Created",
                "message": "m",
            },
        )
    found = core.list_namespaced_event(
        ns, field_selector="involvedObject.kind=TrainJob,involvedObject.name=job-b"
    )
    assert [e.metadata.name for e in found.items] == ["e2"]


def test_limit_and_continue_page_through_everything(core: Any, ns: str) -> None:
    for i in range(7):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i}"}})
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(ns, limit=3, _continue=token)
        names += [i.metadata.name for i in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"cm-{i}" for i in range(7)] and pages == 3


def test_namespaced_create_needs_an_existing_namespace(tj_api: Any, custom: Any) -> None:
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(
            *TRAINER, "no-such-namespace", "trainjobs", trainjob("x")
        )
    status = json.loads(err.value.body)
    assert (err.value.status, status["details"]) == (
        404,
        {"name": "no-such-namespace", "kind": "namespaces"},
    )


def test_deleting_a_namespace_removes_its_objects_and_blocks_new_ones(
    core: Any, custom: Any, ns: str
) -> None:
    held = trainjob("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    custom.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", held)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    core.delete_namespace(ns)
    assert core.read_namespace(ns).status.phase == "Terminating"
    assert core.list_namespaced_config_map(ns).items == []
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "late"}})
    assert err.value.status == 403
    custom.patch_namespaced_custom_object(
        *TRAINER, ns, "trainjobs", "held", {"metadata": {"finalizers": None}}
    )
    assert namespace_gone(core, ns)


def test_the_default_namespace_cannot_be_deleted(core: Any) -> None:
    with pytest.raises(ApiException) as err:
        core.delete_namespace("default")
    assert err.value.status == 403


def _apply(
    api_client: Any, ns: str, body: dict[str, Any], manager: str | None, force: bool = False
) -> tuple[int, Any, Any]:
    query = [("fieldManager", manager)] if manager else []
    if force:
        query.append(("force", "true"))
    return kube_request(
        api_client,
        "PATCH",
        f"{T}/namespaces/{ns}/trainjobs/{body['metadata']['name']}",
        body,
        "application/apply-patch+yaml",
        query,
    )


def test_apply_needs_a_field_manager(api_client: Any, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        _apply(api_client, ns, trainjob("nomgr"), None)
    assert err.value.status == 422 and "fieldManager" in str(err.value.body)


def test_apply_removes_what_the_same_manager_stops_applying(
    api_client: Any, tj_api: Any, ns: str
) -> None:
    _apply(api_client, ns, trainjob("own", labels={"keep": "1", "drop": "1"}), "mgr")
    _apply(api_client, ns, trainjob("own", labels={"keep": "1"}), "mgr")
    assert tj_api("get", "own")["metadata"]["labels"] == {"keep": "1"}


def test_apply_conflicts_with_another_manager_unless_forced(
    api_client: Any, tj_api: Any, ns: str
) -> None:
    _apply(api_client, ns, trainjob("c", suspend=True), "first")
    with pytest.raises(ApiException) as err:
        _apply(api_client, ns, trainjob("c", suspend=False), "second")
    assert err.value.status == 409 and "conflict" in str(err.value.body)
    _apply(api_client, ns, trainjob("c", suspend=False), "second", force=True)
    assert tj_api("get", "c")["spec"]["suspend"] is False


def test_strategic_merge_is_415_for_custom_kinds_and_merges_lists_by_name_for_core(
    api_client: Any, core: Any, ns: str
) -> None:
    with pytest.raises(ApiException) as err:
        kube_request(
            api_client,
            "PATCH",
            f"{T}/namespaces/{ns}/trainjobs/x",
            {},
            "application/strategic-merge-patch+json",
        )
    assert err.value.status == 415
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "one"}, {"name": "b", "image": "two"}]},
        },
    )
    patch = {"spec": {"containers": [{"name": "b", "image": "three"}]}}
    _, pod, _ = kube_request(
        api_client,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/p",
        patch,
        "application/strategic-merge-patch+json",
    )
    assert [(c["name"], c["image"]) for c in pod["spec"]["containers"]] == [
        ("a", "one"),
        ("b", "three"),
    ]


def _owned(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    return {"metadata": {"name": name, "ownerReferences": [ref]}}


@pytest.mark.parametrize(
    ("policy", "child_survives"),
    [(None, False), ("Background", False), ("Foreground", False), ("Orphan", True)],
    ids=[
        "default is background",
        "background deletes dependents",
        "foreground deletes dependents first",
        "orphan keeps dependents",
    ],
)
def test_deletion_propagation(core: Any, ns: str, policy: str | None, child_survives: bool) -> None:
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}}).to_dict()
    core.create_namespaced_config_map(ns, _owned("child", owner))
    body = {"propagationPolicy": policy} if policy else None
    core.delete_namespaced_config_map("owner", ns, body=body)
    names = [c.metadata.name for c in core.list_namespaced_config_map(ns).items]
    assert names == (["child"] if child_survives else [])
    if child_survives:
        assert not core.read_namespaced_config_map("child", ns).metadata.owner_references


def test_foreground_deletion_waits_for_a_dependent_with_a_finalizer(core: Any, ns: str) -> None:
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}}).to_dict()
    child = _owned("child", owner)
    child["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_config_map(ns, child)
    core.delete_namespaced_config_map("owner", ns, body={"propagationPolicy": "Foreground"})
    waiting = core.read_namespaced_config_map("owner", ns)
    assert (
        waiting.metadata.deletion_timestamp and "foregroundDeletion" in waiting.metadata.finalizers
    )
    core.patch_namespaced_config_map("child", ns, {"metadata": {"finalizers": None}})
    assert core.list_namespaced_config_map(ns).items == []


def test_delete_preconditions(core: Any, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("cm", ns, body={"preconditions": {"uid": "not-the-uid"}})
    assert err.value.status == 409


def test_put_needs_a_resource_version_for_custom_kinds_only(
    tj_api: Any, core: Any, ns: str
) -> None:
    created = tj_api("create", trainjob("put"))
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:
        tj_api("replace", "put", created)
    assert err.value.status == 422
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    replaced = core.replace_namespaced_config_map(
        "cm", ns, {"metadata": {"name": "cm"}, "data": {"a": "2"}}
    )
    assert replaced.data == {"a": "2"}


def test_dry_run_stores_nothing(tj_api: Any) -> None:
    answer = tj_api("create", trainjob("dry"), dry_run="All")
    assert answer["metadata"]["name"] == "dry"
    assert tj_api("list")["items"] == []


def test_a_write_records_its_field_manager(tj_api: Any) -> None:
    tj_api("create", trainjob("mf"), field_manager="creator")
    entry = tj_api("get", "mf")["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == (
        "creator",
        "Update",
        "FieldsV1",
    )
    assert "f:spec" in entry["fieldsV1"]


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "code", "reason"),
    [
        ("GET", "/trainjobs/missing", None, "application/json", 404, "NotFound"),
        (
            "POST",
            "/trainjobs",
            {"apiVersion": "v1", "kind": "ConfigMap"},
            "application/json",
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/trainjobs",
            trainjob("bad", trainer={"numNodes": "x"}),
            "application/json",
            422,
            "Invalid",
        ),
        (
            "PATCH",
            "/trainjobs/missing",
            {},
            "application/strategic-merge-patch+json",
            415,
            "UnsupportedMediaType",
        ),
    ],
    ids=[
        "missing object",
        "wrong kind in the body",
        "schema violation",
        "strategic merge on a custom kind",
    ],
)
def test_errors_are_status_objects_with_plain_json_content_type(
    api_client: Any,
    ns: str,
    method: str,
    path: str,
    body: Any,
    content_type: str,
    code: int,
    reason: str,
) -> None:
    with pytest.raises(ApiException) as err:
        kube_request(api_client, method, f"{T}/namespaces/{ns}{path}", body, content_type)
    status = json.loads(err.value.body)
    assert (err.value.status, status["kind"], status["code"], status["reason"]) == (
        code,
        "Status",
        code,
        reason,
    )
    assert err.value.headers["Content-Type"] == "application/json"


def _raw(cluster: Cluster, path: str, token: str | None) -> tuple[int, dict[str, Any]]:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]
    ctx = ssl.create_default_context()
    if "certificate-authority-data" in server:
        import base64

        ctx.load_verify_locations(
            cadata=base64.b64decode(server["certificate-authority-data"]).decode()
        )
    request = urllib.request.Request(server["server"] + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("token", [None, "wrong"], ids=["no token", "a wrong token"])
def test_requests_without_a_valid_token_get_401(cluster: Cluster, token: str | None) -> None:
    code, body = _raw(cluster, "/api/v1/namespaces", token)
    assert code == 401 and body["reason"] == "Unauthorized"


def test_discovery_lists_resources_subresources_short_names_and_verbs(
    core: Any, cluster: Cluster
) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    token = config["users"][0]["user"].get("token")
    _, trainer = _raw(cluster, T, token)
    by_name = {r["name"]: r for r in trainer["resources"]}
    assert (
        by_name["trainjobs"]["namespaced"] and not by_name["clustertrainingruntimes"]["namespaced"]
    )
    assert set(by_name["trainjobs/status"]["verbs"]) == {"get", "patch", "update"}
    assert "watch" in by_name["trainjobs"]["verbs"]
    _, core_list = _raw(cluster, "/api/v1", token)
    core_by_name = {r["name"]: r for r in core_list["resources"]}
    assert "po" in core_by_name["pods"]["shortNames"] and "pods/log" in core_by_name
    _, groups = _raw(cluster, "/apis", token)
    assert {"trainer.kubeflow.org", "jobset.x-k8s.io"} <= {g["name"] for g in groups["groups"]}


def test_an_object_whose_owners_are_all_gone_is_collected(core: Any, ns: str) -> None:
    orphan = {
        "metadata": {
            "name": "late-child",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "gone",
                    "uid": "0b5e7c1e-0000-4000-8000-000000000000",
                }
            ],
        }
    }
    core.create_namespaced_config_map(ns, orphan)
    assert core.list_namespaced_config_map(ns).items == []


def test_a_warning_with_non_ascii_text_is_escaped(embedded: Any) -> None:
    from kubetrain.local.apiserver.http import _respond

    response = _respond({}, warnings=["naïve"])
    assert response.headers["Warning"] == '299 - "na\\xefve"'


def test_events_are_one_store_served_in_both_shapes(api_client: Any, core: Any, ns: str) -> None:
    ev = "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "core-made"},
            "involvedObject": {"kind": "TrainJob", "name": "job-a", "namespace": ns},
            "reason": "Created",
            "message": "from core",
            "firstTimestamp": "2026-11-29T10:00:00Z",
        },
    )
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "new-made"},
        "regarding": {"kind": "TrainJob", "name": "job-b", "namespace": ns},
        "reason": "Created",
        "note": "from events.k8s.io",
        "type": "Normal",
        "action": "Create",
        "reportingController": "trainer-trainjob-controller",
        "reportingInstance": "trainer-1",
        "eventTime": "2026-11-29T10:00:00.000000Z",
    }
    code, created, _ = kube_request(api_client, "POST", ev, body)
    assert code == 201 and created["note"] == "from events.k8s.io"
    as_core = {e.metadata.name: e for e in core.list_namespaced_event(ns).items}
    assert as_core["new-made"].message == "from events.k8s.io"
    assert as_core["new-made"].involved_object.name == "job-b"
    _, listed, _ = kube_request(
        api_client, "GET", ev, query=[("fieldSelector", "regarding.name=job-a")]
    )
    assert [(e["metadata"]["name"], e["note"]) for e in listed["items"]] == [
        ("core-made", "from core")
    ]


def test_one_manager_applying_spec_and_status_keeps_both(
    api_client: Any, tj_api: Any, ns: str
) -> None:
    _apply(api_client, ns, trainjob("both", suspend=True), "trainer")
    status = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "both"},
        "status": {"conditions": [condition()]},
    }
    kube_request(
        api_client,
        "PATCH",
        f"{T}/namespaces/{ns}/trainjobs/both/status",
        status,
        "application/apply-patch+yaml",
        [("fieldManager", "trainer")],
    )
    stored = tj_api("get", "both")
    assert stored["spec"]["suspend"] is True, (
        "the status apply does not drop what the main apply set"
    )
    assert stored["status"]["conditions"][0]["type"] == "Complete"


def _patch_entry(manager: str, value: str) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"by": value}}}},
    }


def test_apply_merges_associative_lists_element_by_element(
    api_client: Any, tj_api: Any, ns: str
) -> None:
    _apply(
        api_client,
        ns,
        trainjob("rp", suspend=True, runtimePatches=[_patch_entry("example.com/a", "a")]),
        "a",
    )
    _apply(
        api_client,
        ns,
        trainjob("rp", suspend=True, runtimePatches=[_patch_entry("example.com/b", "b")]),
        "b",
    )
    managers = [p["manager"] for p in tj_api("get", "rp")["spec"]["runtimePatches"]]
    assert managers == ["example.com/a", "example.com/b"], (
        "runtimePatches is a list-map keyed by manager"
    )
    _apply(api_client, ns, trainjob("rp", suspend=True), "a")
    managers = [p["manager"] for p in tj_api("get", "rp")["spec"]["runtimePatches"]]
    assert managers == ["example.com/b"], (
        "a manager that stops applying its element removes only that element"
    )


def test_two_managers_apply_their_own_conditions(api_client: Any, tj_api: Any, ns: str) -> None:
    tj_api("create", trainjob("conds"))
    for manager, kind in [("one", "Complete"), ("two", "Suspended")]:
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "conds"},
            "status": {"conditions": [condition(kind)]},
        }
        kube_request(
            api_client,
            "PATCH",
            f"{T}/namespaces/{ns}/trainjobs/conds/status",
            body,
            "application/apply-patch+yaml",
            [("fieldManager", manager)],
        )
    assert [c["type"] for c in tj_api("get", "conds")["status"]["conditions"]] == [
        "Complete",
        "Suspended",
    ]


def test_a_second_manager_applying_the_same_value_shares_ownership(
    api_client: Any, tj_api: Any, ns: str
) -> None:
    _apply(api_client, ns, trainjob("shared", labels={"team": "x"}), "first")
    _apply(api_client, ns, trainjob("shared", labels={"team": "x"}), "second")
    _apply(api_client, ns, trainjob("shared"), "first")
    assert tj_api("get", "shared")["metadata"]["labels"] == {"team": "x"}, (
        "still owned by the second manager"
    )


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("DELETE", "/status"), ("POST", "/status"), ("PUT", "/log")],
    ids=["deleting a status", "posting to a status", "writing a log"],
)
def test_verbs_a_subresource_does_not_have_are_405(
    api_client: Any, core: Any, ns: str, method: str, suffix: str
) -> None:
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    with pytest.raises(ApiException) as err:
        kube_request(api_client, method, f"/api/v1/namespaces/{ns}/pods/p{suffix}", {})
    assert err.value.status == 405
    assert core.read_namespaced_pod("p", ns).metadata.name == "p"


@pytest.mark.parametrize(
    ("pod_spec", "phase", "stays"),
    [
        pytest.param({"nodeName": "node-a"}, None, True, id="a pod on a node stays terminating"),
        pytest.param({}, None, False, id="a pod on no node goes at once"),
        pytest.param({"nodeName": "node-a"}, "Failed", False, id="an ended pod goes at once"),
    ],
)
def test_pod_deletion_is_graceful_until_the_kubelet_deletes_it_with_grace_zero(
    core: Any, ns: str, pod_spec: dict[str, Any], phase: str | None, stays: bool
) -> None:
    spec = {"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 20}
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {**spec, **pod_spec}})
    if phase:
        core.patch_namespaced_pod_status("p", ns, {"status": {"phase": phase}})
    core.delete_namespaced_pod("p", ns)
    left = core.list_namespaced_pod(ns).items
    if not stays:
        assert left == []
        return
    [pod] = left
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 20
    # What the kubelet sends once every process of the pod has ended.
    core.delete_namespaced_pod("p", ns, grace_period_seconds=0)
    assert core.list_namespaced_pod(ns).items == []
