"""Strategic merge patch and runtimePatches (trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go): expectations written from the
apimachinery rules by hand, plus properties over random JSON trees."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.runtime.smp import (
    PatchError,
    apply_runtime_patches,
    merge_resources,
    strategic_merge,
)

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def runtime_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": "a"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "dataset-initializer",
                    "template": {
                        "metadata": {"labels": {ANCESTOR: "dataset-initializer"}},
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [{"name": "dataset-initializer", "image": "di"}]
                                }
                            }
                        },
                    },
                },
                {
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {ANCESTOR: "trainer"}},
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "node",
                                            "image": "img",
                                            "env": [
                                                {"name": "A", "value": "1"},
                                                {"name": "B", "value": "2"},
                                            ],
                                            "volumeMounts": [{"name": "v", "mountPath": "/a"}],
                                        }
                                    ],
                                    "volumes": [{"name": "v", "emptyDir": {}}],
                                    "tolerations": [{"key": "t1", "operator": "Exists"}],
                                    "nodeSelector": {"zone": "z1"},
                                }
                            }
                        },
                    },
                },
            ]
        },
    }


def node_patch(pod_spec: dict[str, Any], manager: str = "example.com/m") -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
                    ]
                }
            }
        },
    }


def node_pod(template: dict[str, Any]) -> dict[str, Any]:
    job = next(j for j in template["spec"]["replicatedJobs"] if j["name"] == "node")
    pod: dict[str, Any] = job["template"]["spec"]["template"]["spec"]
    return pod


def job_names(template: dict[str, Any]) -> list[str]:
    return [j["name"] for j in template["spec"]["replicatedJobs"]]


# (id, patches, check on the result)
POD_CASES: list[tuple[str, list[dict[str, Any]], str, Any]] = [
    (
        "an env patch on the node container replaces the value in place",
        [node_patch({"containers": [{"name": "node", "env": [{"name": "B", "value": "9"}]}]})],
        "containers[0].env",
        [{"name": "A", "value": "1"}, {"name": "B", "value": "9"}],
    ),
    (
        "a new env var goes before the runtime's vars, as apimachinery orders new items",
        [node_patch({"containers": [{"name": "node", "env": [{"name": "C", "value": "3"}]}]})],
        "containers[0].env",
        [{"name": "C", "value": "3"}, {"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
    ),
    (
        "a new env var listed after a patched one follows it",
        [
            node_patch(
                {
                    "containers": [
                        {
                            "name": "node",
                            "env": [{"name": "A", "value": "x"}, {"name": "C", "value": "3"}],
                        }
                    ]
                }
            )
        ],
        "containers[0].env",
        [{"name": "A", "value": "x"}, {"name": "C", "value": "3"}, {"name": "B", "value": "2"}],
    ),
    (
        "tolerations are atomic: the patch's list replaces the runtime's",
        [node_patch({"tolerations": [{"key": "gpu", "operator": "Exists"}]})],
        "tolerations",
        [{"key": "gpu", "operator": "Exists"}],
    ),
    (
        "nodeSelector maps merge key by key",
        [node_patch({"nodeSelector": {"pool": "big"}})],
        "nodeSelector",
        {"zone": "z1", "pool": "big"},
    ),
    (
        "volumeMounts merge by mountPath, so a new name at the same path replaces the old",
        [
            node_patch(
                {
                    "containers": [
                        {"name": "node", "volumeMounts": [{"name": "w", "mountPath": "/a"}]}
                    ]
                }
            )
        ],
        "containers[0].volumeMounts",
        [{"name": "w", "mountPath": "/a"}],
    ),
    (
        "volumes merge by name and keep the runtime's volume",
        [node_patch({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]})],
        "volumes",
        [
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "v", "emptyDir": {}},
        ],
    ),
    (
        "imagePullSecrets and schedulingGates merge by name",
        [
            node_patch({"imagePullSecrets": [{"name": "reg"}], "schedulingGates": [{"name": "g"}]}),
            node_patch({"imagePullSecrets": [{"name": "reg"}, {"name": "reg2"}]}),
        ],
        "imagePullSecrets",
        [{"name": "reg"}, {"name": "reg2"}],
    ),
    (
        "a patched container keeps the fields the patch does not mention",
        [node_patch({"containers": [{"name": "node", "securityContext": {"runAsUser": 1000}}]})],
        "containers[0]",
        {
            "name": "node",
            "image": "img",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "volumeMounts": [{"name": "v", "mountPath": "/a"}],
            "securityContext": {"runAsUser": 1000},
        },
    ),
    (
        "two patches apply in list order, so the later one wins",
        [
            node_patch({"nodeSelector": {"zone": "z2"}}),
            node_patch({"nodeSelector": {"zone": "z3"}}),
        ],
        "nodeSelector",
        {"zone": "z3"},
    ),
    (
        "an empty list in a patch clears nothing (Go omits empty lists when it marshals the patch)",
        [node_patch({"tolerations": []})],
        "tolerations",
        [{"key": "t1", "operator": "Exists"}],
    ),
    (
        "a $patch directive in a TrainJob patch is dropped, as Go's typed round trip drops it",
        [
            node_patch(
                {"tolerations": [{"key": "x"}], "nodeSelector": {"$patch": "replace", "a": "b"}}
            )
        ],
        "nodeSelector",
        {"zone": "z1", "a": "b"},
    ),
    (
        "terminationGracePeriodSeconds (v2.3) is set on the pod",
        [node_patch({"terminationGracePeriodSeconds": 5})],
        "terminationGracePeriodSeconds",
        5,
    ),
]


def _dig(obj: Any, path: str) -> Any:
    for part in path.replace("]", "").split("."):
        name, _, index = part.partition("[")
        obj = obj[name]
        if index:
            obj = obj[int(index)]
    return obj


@pytest.mark.parametrize(
    ("patches", "path", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_spec_patches(patches: list[dict[str, Any]], path: str, expected: Any) -> None:
    template = runtime_template()
    before = copy.deepcopy(template)
    result = apply_runtime_patches(template, patches)
    assert _dig(node_pod(result), path) == expected
    assert template == before, "the runtime template must not be modified"


def test_unpatched_jobs_survive_untouched() -> None:
    template = runtime_template()
    result = apply_runtime_patches(template, [node_patch({"nodeSelector": {"a": "b"}})])
    assert job_names(result) == ["dataset-initializer", "node"]
    assert result["spec"]["replicatedJobs"][0] == template["spec"]["replicatedJobs"][0]


def test_jobs_keep_the_runtime_order_when_a_patch_lists_them_in_reverse() -> None:
    patch = {
        "manager": "m.io/x",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"metadata": {"labels": {"x": "1"}}}},
                        {
                            "name": "dataset-initializer",
                            "template": {"metadata": {"labels": {"y": "2"}}},
                        },
                    ]
                }
            }
        },
    }
    result = apply_runtime_patches(runtime_template(), [patch])
    assert job_names(result) == ["dataset-initializer", "node"]
    assert result["spec"]["replicatedJobs"][1]["template"]["metadata"]["labels"] == {
        ANCESTOR: "trainer",
        "x": "1",
    }


def test_a_patch_for_an_unknown_replicated_job_is_added_and_sorts_first() -> None:
    # SMP adds it (in front), then Go's sort gives an unknown name order 0: the webhook rejects
    # such patches, but a reconcile would render exactly this.
    patch = {
        "manager": "m.io/x",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "extra"}]}}},
    }
    result = apply_runtime_patches(runtime_template(), [patch])
    assert job_names(result) == ["extra", "dataset-initializer", "node"]


@pytest.mark.parametrize(
    ("runtime_meta", "patch_metas", "expected"),
    [
        (
            {"labels": {"team": "a"}},
            [{"labels": {"x": "1"}}, {"labels": {"x": "2", "y": "3"}}],
            {"labels": {"team": "a", "x": "2", "y": "3"}},
        ),
        (
            {},
            [{"annotations": {"kueue.x-k8s.io/queue": "q"}}],
            {"annotations": {"kueue.x-k8s.io/queue": "q"}},
        ),
        ({"labels": {"team": "a"}}, [{"labels": {}}], {"labels": {"team": "a"}}),
    ],
    ids=[
        "JobSet labels overlay in list order and the later patch wins",
        "annotations appear when only a patch has them",
        "an empty patch label map changes nothing",
    ],
)
def test_jobset_metadata_overlay(
    runtime_meta: dict[str, Any], patch_metas: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    template = runtime_template()
    template["metadata"] = runtime_meta
    patches = [
        {"manager": f"m.io/{i}", "trainingRuntimeSpec": {"template": {"metadata": m}}}
        for i, m in enumerate(patch_metas)
    ]
    result = apply_runtime_patches(template, patches)
    assert result["metadata"] == expected
    assert result["spec"] == template["spec"], "metadata-only patches leave the spec alone"


def test_no_patches_is_identity() -> None:
    assert apply_runtime_patches(runtime_template(), []) == runtime_template()


# --- the general merge and its directives ---------------------------------------------------------

MERGE_CASES: list[tuple[str, Any, Any, str | None, Any]] = [
    ("null deletes a key", {"a": 1, "b": 2}, {"a": None}, None, {"b": 2}),
    ("null for an absent key is ignored", {"a": 1}, {"z": None}, None, {"a": 1}),
    ("nested maps merge", {"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}, None, {"a": {"b": 1, "c": 3}}),
    ("a list without a strategy is replaced", {"l": [1, 2]}, {"l": [3]}, None, {"l": [3]}),
    (
        "$patch: replace on a map replaces it",
        {"nodeSelector": {"a": "1"}},
        {"nodeSelector": {"$patch": "replace", "b": "2"}},
        "PodSpec",
        {"nodeSelector": {"b": "2"}},
    ),
    (
        "$patch: delete on a map leaves it empty",
        {"m": {"a": 1}},
        {"m": {"$patch": "delete"}},
        None,
        {"m": {}},
    ),
    (
        "$patch: merge is the default",
        {"m": {"a": 1}},
        {"m": {"$patch": "merge", "b": 2}},
        None,
        {"m": {"a": 1, "b": 2}},
    ),
    (
        "$patch: delete removes one keyed element",
        {"containers": [{"name": "a"}, {"name": "b"}]},
        {"containers": [{"name": "a", "$patch": "delete"}]},
        "PodSpec",
        {"containers": [{"name": "b"}]},
    ),
    (
        "$patch: replace inside a keyed list replaces the whole list",
        {"containers": [{"name": "a"}, {"name": "b"}]},
        {"containers": [{"name": "c"}, {"$patch": "replace"}]},
        "PodSpec",
        {"containers": [{"name": "c"}]},
    ),
    (
        "ports merge by containerPort",
        {"ports": [{"containerPort": 80, "name": "http"}]},
        {"ports": [{"containerPort": 80, "protocol": "TCP"}]},
        "Container",
        {"ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}]},
    ),
    (
        "finalizers are a merged set of scalars",
        {"finalizers": ["a", "b"]},
        {"finalizers": ["c", "a"]},
        "ObjectMeta",
        {"finalizers": ["c", "a", "b"]},
    ),
    (
        "$deleteFromPrimitiveList removes scalars",
        {"finalizers": ["a", "b", "c"]},
        {"$deleteFromPrimitiveList/finalizers": ["b"]},
        "ObjectMeta",
        {"finalizers": ["a", "c"]},
    ),
    (
        "$setElementOrder puts the list in the given order",
        {"containers": [{"name": "a"}, {"name": "b"}]},
        {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "x"}],
        },
        "PodSpec",
        {"containers": [{"name": "b"}, {"name": "a", "image": "x"}]},
    ),
    (
        "$retainKeys drops the keys it does not list",
        {"volumes": [{"name": "v", "emptyDir": {}}]},
        {
            "volumes": [
                {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}
            ]
        },
        "PodSpec",
        {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]},
    ),
    (
        "dependsOn merges by name inside a replicated job",
        {"replicatedJobs": [{"name": "n", "dependsOn": [{"name": "a", "status": "Ready"}]}]},
        {"replicatedJobs": [{"name": "n", "dependsOn": [{"name": "a", "status": "Complete"}]}]},
        "JobSetSpec",
        {"replicatedJobs": [{"name": "n", "dependsOn": [{"name": "a", "status": "Complete"}]}]},
    ),
    (
        "a value new to the original loses its directives and nulls",
        {},
        {"m": {"$patch": "delete", "a": None, "b": 1}},
        None,
        {"m": {"b": 1}},
    ),
    (
        "a keyed list holding scalars falls back to replacement",
        {"containers": [{"name": "a"}]},
        {"containers": ["x"]},
        "PodSpec",
        {"containers": ["x"]},
    ),
]


@pytest.mark.parametrize(
    ("original", "patch", "schema", "expected"),
    [c[1:] for c in MERGE_CASES],
    ids=[c[0] for c in MERGE_CASES],
)
def test_strategic_merge(original: Any, patch: Any, schema: str | None, expected: Any) -> None:
    before = copy.deepcopy((original, patch))
    assert strategic_merge(original, patch, schema) == expected
    assert (original, patch) == before, "inputs must not be modified"


@pytest.mark.parametrize(
    "patch",
    [
        {"m": {"$patch": "bogus"}},
        {"containers": [{"$patch": "merge"}]},
        {"containers": [{"$patch": "delete"}]},
    ],
    ids=[
        "an unknown map directive",
        "a merge directive in a list",
        "a list delete without the merge key",
    ],
)
def test_malformed_directives_raise_patch_error(patch: Any) -> None:
    with pytest.raises(PatchError):
        strategic_merge({"m": {}, "containers": [{"name": "a"}]}, patch, "PodSpec")


@pytest.mark.parametrize(
    ("base", "override", "expected"),
    [
        (
            {"limits": {"cpu": "1", "memory": "1Gi"}},
            {"limits": {"cpu": "2"}},
            {"limits": {"cpu": "2", "memory": "1Gi"}},
        ),
        (
            {"limits": {"nvidia.com/gpu": 2}},
            {"requests": {"cpu": 4}},
            {"limits": {"nvidia.com/gpu": 2}, "requests": {"cpu": 4}},
        ),
        (
            {"claims": [{"name": "gpu"}]},
            {"claims": [{"name": "nic", "request": "vf"}]},
            {"claims": [{"name": "nic", "request": "vf"}, {"name": "gpu"}]},
        ),
        (None, {"limits": {"cpu": "1"}}, {"limits": {"cpu": "1"}}),
        ({"limits": {"cpu": "1"}}, {}, {"limits": {"cpu": "1"}}),
    ],
    ids=[
        "resourcesPerNode limits override per resource name",
        "requests and limits merge independently",
        "claims merge by name",
        "no runtime resources takes the TrainJob's",
        "an empty resourcesPerNode keeps the runtime's",
    ],
)
def test_merge_resources(base: Any, override: Any, expected: Any) -> None:
    assert merge_resources(base, override) == expected


# --- properties -------------------------------------------------------------------------------

# Keys that hit the schema's keyed lists as well as plain ones; no "$" keys, so no directives.
KEYS = st.sampled_from(
    [
        "name",
        "containers",
        "env",
        "replicatedJobs",
        "template",
        "spec",
        "value",
        "a",
        "b",
        "finalizers",
        "ports",
        "containerPort",
    ]
)
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
TREES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=25,
)
OBJECTS = st.dictionaries(KEYS, TREES, max_size=5)
SCHEMAS = st.sampled_from(
    [None, "JobSetSpec", "PodSpec", "Container", "ObjectMeta", "ReplicatedJob"]
)


@settings(max_examples=300, deadline=None)
@given(OBJECTS, OBJECTS, SCHEMAS)
def test_merge_never_raises_on_random_json_trees(
    original: Any, patch: Any, schema: str | None
) -> None:
    result = strategic_merge(original, patch, schema)
    json.dumps(result)  # still plain JSON


@settings(max_examples=200, deadline=None)
@given(OBJECTS, SCHEMAS)
def test_patching_with_an_empty_object_is_identity(original: Any, schema: str | None) -> None:
    assert strategic_merge(original, {}, schema) == original


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["manager", "trainingRuntimeSpec"]), TREES, max_size=2),
        max_size=3,
    )
)
def test_runtime_patches_never_raise_on_random_patches(patches: list[Any]) -> None:
    json.dumps(apply_runtime_patches(runtime_template(), patches))


JOB_NAMES = st.sampled_from(["dataset-initializer", "node"])
KNOWN_JOB_PATCHES = st.lists(
    st.fixed_dictionaries(
        {
            "manager": st.just("example.com/m"),
            "trainingRuntimeSpec": st.fixed_dictionaries(
                {
                    "template": st.fixed_dictionaries(
                        {
                            "spec": st.fixed_dictionaries(
                                {
                                    "replicatedJobs": st.lists(
                                        st.fixed_dictionaries(
                                            {"name": JOB_NAMES, "replicas": st.integers(1, 3)}
                                        ),
                                        max_size=3,
                                    )
                                }
                            )
                        }
                    )
                }
            ),
        }
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(KNOWN_JOB_PATCHES)
def test_patches_naming_known_jobs_keep_the_runtime_job_order(patches: list[Any]) -> None:
    assert job_names(apply_runtime_patches(runtime_template(), patches)) == [
        "dataset-initializer",
        "node",
    ]


def test_primitive_set_element_order() -> None:
    merged = strategic_merge(
        {"finalizers": ["a", "b"]},
        {"$setElementOrder/finalizers": ["b", "x", "a"], "finalizers": ["x"]},
        "ObjectMeta",
    )
    assert merged == {"finalizers": ["b", "x", "a"]}
