"""``cache://SCHEMA/TABLE``: upstream's env read and checked, and the three objects upstream's
cache initializer creates, field for field (§7.2)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.initializers import InitializerError, read_config
from kubetrain.initializers.cache import cache_objects, cache_settings

ENV = {
    "STORAGE_URI": "cache://reviews/train",
    "TRAIN_JOB_NAME": "job",
    "CACHE_IMAGE": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0",
    "IAM_ROLE": "arn:aws:iam::1:role/cache",
    "METADATA_LOC": "s3://bucket/warehouse/reviews/train/metadata/00001.metadata.json",
    "CLUSTER_SIZE": "3",
}
TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "job", "uid": "u-1"},
}
OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "job",
    "uid": "u-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def objects(**env: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    merged = {**ENV, **env}
    return cache_objects(cache_settings(read_config("dataset", merged), merged), TRAINJOB, "ns")


def test_the_service_account_carries_the_iam_role_and_the_trainjob_as_owner() -> None:
    account, _, _ = objects()
    assert account["metadata"] == {
        "name": "job-cache",
        "namespace": "ns",
        "ownerReferences": [OWNER],
        "annotations": {
            "eks.amazonaws.com/sts-regional-endpoints": "true",
            "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/cache",
        },
    }


def test_the_leaderworkerset_is_upstreams_head_and_workers() -> None:
    _, lws, _ = objects(AWS_ACCESS_KEY_ID="k")
    assert lws["metadata"] == {"name": "job-cache", "namespace": "ns", "ownerReferences": [OWNER]}
    template = lws["spec"]["leaderWorkerTemplate"]
    assert (lws["spec"]["replicas"], template["size"]) == (1, 3)
    assert template["leaderTemplate"]["metadata"] == {"labels": {"app": "job-cache-head"}}
    head = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert template["workerTemplate"]["spec"]["serviceAccountName"] == "job-cache"
    for container, role, cpu, mem in ((head, "head", "1", "1Gi"), (worker, "worker", "2", "2Gi")):
        assert container["name"] == role and container["command"] == [role]
        assert container["args"] == ["0.0.0.0", "50051"]
        assert container["resources"]["limits"] == {"cpu": cpu, "memory": mem}
        assert container["ports"] == [
            {"containerPort": 50051, "name": "grpc"},
            {"containerPort": 8080, "name": "health"},
        ]
        assert container["readinessProbe"] == {
            "httpGet": {"path": "/ready", "port": 8080},
            "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 5,
            "failureThreshold": 3,
        }  # fmt: skip
        assert container["env"] == [
            {"name": "METADATA_LOC", "value": ENV["METADATA_LOC"]},
            {"name": "TABLE_NAME", "value": "train"},
            {"name": "SCHEMA_NAME", "value": "reviews"},
            {"name": "AWS_ACCESS_KEY_ID", "value": "k"},
        ]


def test_the_service_selects_the_head_on_the_flight_port() -> None:
    _, _, service = objects()
    assert service["metadata"]["name"] == "job-cache-service"
    assert service["spec"] == {
        "selector": {"app": "job-cache-head"},
        "ports": [{"protocol": "TCP", "port": 50051, "targetPort": 50051}],
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param({"TRAIN_JOB_NAME": ""}, "TRAIN_JOB_NAME not set", id="no TrainJob name"),
        pytest.param(
            {"CACHE_IMAGE": "", "METADATA_LOC": ""},
            "CACHE_IMAGE, METADATA_LOC not set",
            id="every missing variable is named",
        ),
        pytest.param(
            {"STORAGE_URI": "cache://reviews"},
            "the cache URI is cache://SCHEMA/TABLE",
            id="a URI without its table",
        ),
        pytest.param({"CLUSTER_SIZE": "x"}, "CLUSTER_SIZE='x' is not a number", id="a bad size"),
        pytest.param(
            {"CLUSTER_SIZE": "1"}, "a head and at least one worker", id="a cache without workers"
        ),
    ],
)
def test_bad_cache_env_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    merged = {**ENV, **env}
    with pytest.raises(InitializerError, match=message):
        cache_settings(read_config("dataset", merged), merged)


def test_the_model_initializer_has_no_cache() -> None:
    with pytest.raises(InitializerError, match=r"unsupported storage URI scheme \(cache://\)"):
        read_config("model", ENV)


def test_the_official_sdks_data_cache_initializer_gets_the_cache_it_asks_for() -> None:
    # What `TrainerClient().train(initializer=Initializer(dataset=DataCacheInitializer(...)))`
    # puts in the TrainJob, plus what the runtime's initializer job adds (the TrainJob's name,
    # the cache image), is what the cache initializer reads.
    sdk = pytest.importorskip(
        "kubeflow.trainer", reason="the official kubeflow SDK is not installed"
    )
    from kubeflow.trainer.backends.kubernetes.utils import get_dataset_initializer

    asked = sdk.DataCacheInitializer(
        storage_uri="cache://reviews/train",
        metadata_loc=ENV["METADATA_LOC"],
        num_data_nodes=4,
        head_cpu="3",
        head_mem="6Gi",
        worker_cpu="5",
        worker_mem="10Gi",
        iam_role="arn:aws:iam::1:role/sdk",
    )
    # The TrainJob's spec.initializer.dataset as the SDK sends it.
    dataset = get_dataset_initializer(asked).model_dump(by_alias=True, exclude_none=True)
    env = {e["name"]: e["value"] for e in dataset["env"]}
    env |= {"STORAGE_URI": dataset["storageUri"], "TRAIN_JOB_NAME": "job"}
    env |= {"CACHE_IMAGE": ENV["CACHE_IMAGE"]}
    account, lws, _ = cache_objects(
        cache_settings(read_config("dataset", env), env), TRAINJOB, "ns"
    )
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 5  # a head and the four data nodes
    for part, cpu, mem in (("leaderTemplate", "3", "6Gi"), ("workerTemplate", "5", "10Gi")):
        (container,) = template[part]["spec"]["containers"]
        assert container["resources"]["limits"] == {"cpu": cpu, "memory": mem}
        assert {"name": "METADATA_LOC", "value": ENV["METADATA_LOC"]} in container["env"]
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith("role/sdk")
