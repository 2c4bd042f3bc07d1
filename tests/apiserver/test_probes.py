"""The 33 semantic probes of the test-harness reference (trainer v2.3.0 pkg/controller/trainjob_controller.go), with the official ``kubernetes``
client, as the Kubeflow SDK uses it. Probe → test:

1 create returns the object (201) ............................ test_create_returns_the_created_object
2-5 server sets uid / resourceVersion / creationTimestamp / generation  test_create_sets_server_fields
6 duplicate create → 409 ....................................... test_duplicate_create_is_409_already_exists
7-8 get existing / get missing → 404 ........................... test_get_existing_and_missing
9-10 list returns items; all-namespaces list ................... test_list_in_namespace_and_across_namespaces
11-12 list kind TrainJobList; list metadata.resourceVersion .... test_list_has_kind_and_resource_version
13-14 labelSelector / fieldSelector honoured .................. test_label_and_field_selectors_are_honoured
15-17 merge patch; JSON patch; generation bumped by spec change  test_merge_patch_json_patch_and_generation
18-20 PATCH /status; status via main ignored; spec via /status ignored  test_status_subresource_is_separate_both_ways
21-23 PUT; stale resourceVersion on PUT / merge patch → 409 ... test_put_replaces_and_stale_resource_version_conflicts
24 server-side apply creating a missing object → 201 ......... test_server_side_apply_creates_a_missing_object
25 generateName .................................................. test_generate_name
26 cluster-scoped create/get ..................................... test_cluster_scoped_create_and_get
27-30 finalizer → deletionTimestamp; removal completes; get/delete after → 404  test_finalizer_holds_deletion_until_removed
31-33 watch delivers ADDED / MODIFIED / DELETED ............... test_watch_delivers_added_modified_deleted_with_resource_versions
"""

from __future__ import annotations

from typing import Any

import pytest
from apiserver_support import TRAINER, condition, kube_request, trainjob
from kubernetes import watch
from kubernetes.client import ApiException


def _status(exc: pytest.ExceptionInfo[ApiException]) -> int:
    return int(exc.value.status)


def test_create_returns_the_created_object(tj_api: Any) -> None:
    created = tj_api("create", trainjob("probe"))
    assert created is not None, "the client returns None unless the answer is 201 with the object"
    assert created["metadata"]["name"] == "probe"


@pytest.mark.parametrize("field", ["uid", "resourceVersion", "creationTimestamp", "generation"])
def test_create_sets_server_fields(tj_api: Any, field: str) -> None:
    created = tj_api("create", trainjob("probe"))
    assert created["metadata"].get(field), f"metadata.{field} is set by the server"


def test_duplicate_create_is_409_already_exists(tj_api: Any) -> None:
    tj_api("create", trainjob("dup"))
    with pytest.raises(ApiException) as err:
        tj_api("create", trainjob("dup"))
    assert _status(err) == 409 and '"reason":"AlreadyExists"' in err.value.body.replace(" ", "")


def test_get_existing_and_missing(tj_api: Any) -> None:
    tj_api("create", trainjob("there"))
    assert tj_api("get", "there")["metadata"]["name"] == "there"
    with pytest.raises(ApiException) as err:
        tj_api("get", "absent")
    assert _status(err) == 404


def test_list_in_namespace_and_across_namespaces(tj_api: Any, custom: Any, ns: str) -> None:
    tj_api("create", trainjob("l1"))
    listed = tj_api("list")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["l1"]
    everywhere = custom.list_cluster_custom_object(*TRAINER, "trainjobs")
    assert ("l1", ns) in {
        (i["metadata"]["name"], i["metadata"]["namespace"]) for i in everywhere["items"]
    }


def test_list_has_kind_and_resource_version(tj_api: Any) -> None:
    listed = tj_api("list")
    assert listed["kind"] == "TrainJobList"
    assert int(listed["metadata"]["resourceVersion"]) > 0


def test_label_and_field_selectors_are_honoured(tj_api: Any) -> None:
    tj_api("create", trainjob("red", labels={"colour": "red"}))
    tj_api("create", trainjob("blue", labels={"colour": "blue"}))
    by_label = tj_api("list", label_selector="colour=red")
    by_field = tj_api("list", field_selector="metadata.name=blue")
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["red"]
    assert [i["metadata"]["name"] for i in by_field["items"]] == ["blue"]


def test_merge_patch_json_patch_and_generation(tj_api: Any, api_client: Any, ns: str) -> None:
    tj_api("create", trainjob("p"))
    merged = tj_api("patch", "p", {"spec": {"suspend": True}})
    assert merged["spec"]["suspend"] is True
    assert merged["metadata"]["generation"] == 2, "a spec change bumps generation"
    _, patched, _ = kube_request(
        api_client,
        "PATCH",
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/p",
        [{"op": "replace", "path": "/spec/trainer/numNodes", "value": 3}],
        "application/json-patch+json",
    )
    assert patched["spec"]["trainer"]["numNodes"] == 3
    assert patched["metadata"]["generation"] == 3


def test_status_subresource_is_separate_both_ways(tj_api: Any) -> None:
    tj_api("create", trainjob("s"))
    with_status = tj_api("patch_status", "s", {"status": {"conditions": [condition()]}})
    assert with_status["status"]["conditions"][0]["type"] == "Complete"
    ignored = tj_api("patch", "s", {"status": {"conditions": [condition("Failed")]}})
    assert ignored["status"]["conditions"][0]["type"] == "Complete", (
        "status via the main resource is ignored"
    )
    spec_via_status = tj_api("patch_status", "s", {"spec": {"suspend": True}})
    assert spec_via_status["spec"]["suspend"] is False, "spec via /status is ignored"


def test_put_replaces_and_stale_resource_version_conflicts(tj_api: Any) -> None:
    created = tj_api("create", trainjob("r"))
    body = dict(created, spec={**created["spec"], "suspend": True})
    replaced = tj_api("replace", "r", body)
    assert replaced["spec"]["suspend"] is True
    with pytest.raises(ApiException) as put_err:
        tj_api("replace", "r", body)  # still carries the first resourceVersion
    assert _status(put_err) == 409
    stale = {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"suspend": False},
    }
    with pytest.raises(ApiException) as patch_err:
        tj_api("patch", "r", stale)
    assert _status(patch_err) == 409


def test_server_side_apply_creates_a_missing_object(tj_api: Any, api_client: Any, ns: str) -> None:
    code, applied, _ = kube_request(
        api_client,
        "PATCH",
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/ssa",
        trainjob("ssa"),
        "application/apply-patch+yaml",
        [("fieldManager", "probe")],
    )
    assert code == 201 and applied["metadata"]["name"] == "ssa"
    assert tj_api("get", "ssa")["metadata"]["managedFields"][0]["manager"] == "probe"


def test_generate_name(tj_api: Any) -> None:
    created = tj_api("create", trainjob(generate_name="gen-"))
    name = created["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5


def test_cluster_scoped_create_and_get(custom: Any) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"generateName": "probe-"},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": []}}},
    }
    created = custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", body)
    name = created["metadata"]["name"]
    try:
        assert "namespace" not in created["metadata"]
        assert (
            custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", name)["metadata"][
                "name"
            ]
            == name
        )
    finally:
        custom.delete_cluster_custom_object(*TRAINER, "clustertrainingruntimes", name)


def test_finalizer_holds_deletion_until_removed(tj_api: Any) -> None:
    body = trainjob("f")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    tj_api("create", body)
    tj_api("delete", "f")
    held = tj_api("get", "f")
    assert held["metadata"]["deletionTimestamp"]
    tj_api("patch", "f", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as get_err:
        tj_api("get", "f")
    assert _status(get_err) == 404
    with pytest.raises(ApiException) as delete_err:
        tj_api("delete", "f")
    assert _status(delete_err) == 404


def test_watch_delivers_added_modified_deleted_with_resource_versions(
    tj_api: Any, custom: Any, ns: str
) -> None:
    since = tj_api("list")["metadata"]["resourceVersion"]
    tj_api("create", trainjob("w"))
    tj_api("patch", "w", {"spec": {"suspend": True}})
    tj_api("delete", "w")
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    for event in w.stream(
        custom.list_namespaced_custom_object,
        *TRAINER,
        ns,
        "trainjobs",
        resource_version=since,
        timeout_seconds=5,
    ):
        seen.append((event["type"], event["object"]["metadata"]["resourceVersion"]))
        if event["type"] == "DELETED":
            w.stop()
    assert [t for t, _ in seen] == ["ADDED", "MODIFIED", "DELETED"]
    versions = [int(rv) for _, rv in seen]
    assert versions == sorted(versions) and versions[0] > int(since)
