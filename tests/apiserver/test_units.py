"""The small pure pieces of the server, as tables: selectors, patches, JSONPath, ages, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.api.errors import FieldError
from kubetrain.local.apiserver.errors import ApiError, aggregate_text, field_error_text
from kubetrain.local.apiserver.patching import merge_patch, strategic_merge_patch
from kubetrain.local.apiserver.selectors import parse_field_selector, parse_label_selector
from kubetrain.local.apiserver.tables import human_duration, jsonpath

LABELS = {"app": "web", "tier": "front", "v": ""}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app = web", True),
        ("app=db", False),
        ("app in (db,web)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("v=", True),
        ("!missing,app", True),
        ("app,tier=front,v", True),
    ],
    ids=[
        "empty selects all",
        "equality",
        "spaces around the operator",
        "a different value",
        "in without spaces",
        "notin of the value",
        "notin of a missing label",
        "the empty value",
        "absence and existence",
        "three requirements",
    ],
)
def test_label_selector_matching(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches({"metadata": {"labels": LABELS}}) is matches


@pytest.mark.parametrize(
    "selector",
    ["app in web", "app in (a", "=x", "a b"],
    ids=["in without parentheses", "unclosed set", "no key", "two bare words"],
)
def test_bad_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector(selector)
    assert err.value.code == 400


def test_field_selectors_know_only_declared_fields() -> None:
    assert parse_field_selector("metadata.name==a", (), "X").matches({"metadata": {"name": "a"}})
    with pytest.raises(ApiError):
        parse_field_selector("spec.x=1", (), "X")


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": "b"}, {"a": {"c": None}}, {"a": {}}),
    ],
    ids=["replace", "add", "null deletes", "nested", "lists replace", "scalar becomes object"],
)
def test_merge_patch_follows_rfc_7386(
    target: dict[str, Any], patch: dict[str, Any], result: dict[str, Any]
) -> None:
    assert merge_patch(target, patch) == result


POD = {
    "metadata": {"finalizers": ["a/one"], "ownerReferences": [{"uid": "u1", "name": "x"}]},
    "spec": {
        "containers": [
            {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "2"},
        ],
        "tolerations": [{"key": "k1"}],
    },
}

STRATEGIC = [
    (
        {"metadata": {"finalizers": ["b/two"]}},
        {"finalizers": ["b/two", "a/one"]},
        "metadata",
    ),
    (
        {"metadata": {"ownerReferences": [{"uid": "u2", "name": "y"}]}},
        {"ownerReferences": [{"uid": "u2", "name": "y"}, {"uid": "u1", "name": "x"}]},
        "metadata",
    ),
    (
        {"spec": {"containers": [{"name": "b", "image": "3"}]}},
        [
            {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "3"},
        ],
        "containers",
    ),
    (
        {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}},
        [
            {
                "name": "a",
                "image": "1",
                "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}],
            },
            {"name": "b", "image": "2"},
        ],
        "containers",
    ),
    (
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}],
                "containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "3"}],
            }
        },
        [
            {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
            {"name": "c", "image": "3"},
        ],
        "containers",
    ),
    ({"spec": {"tolerations": [{"key": "k2"}]}}, [{"key": "k2"}], "tolerations"),
]


@pytest.mark.parametrize(
    ("patch", "expected", "where"),
    STRATEGIC,
    ids=[
        "finalizers merge as a set (new ones first, as apimachinery orders them)",
        "owner references merge by uid",
        "containers merge by name",
        "env merges by name inside a container",
        "a deleted container goes and element order is kept",
        "tolerations have no strategy and are replaced",
    ],
)  # fmt: skip
def test_strategic_merge_follows_the_published_patch_strategies(
    patch: dict[str, Any], expected: Any, where: str
) -> None:
    merged = strategic_merge_patch(POD, patch, "v1", "Pod")
    got = merged["metadata"] if where == "metadata" else merged["spec"][where]
    if where == "metadata":
        got = {k: got[k] for k in expected}
    assert got == expected


def test_a_patch_strategy_table_is_generated_for_every_served_core_kind() -> None:
    from kubetrain.local.apiserver.resources import BUILTIN_RESOURCES
    from kubetrain.runtime.smp import core_kind_schema

    core = [r for r in BUILTIN_RESOURCES if not r.custom and not r.view]
    assert [r.kind for r in core if core_kind_schema(r.api_version, r.kind) is None] == []


OBJ = {
    "metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "status": {
        "conditions": [
            {"type": "Created", "status": "True"},
            {"type": "Complete", "status": "True"},
        ]
    },
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        (".metadata.name", ["x"]),
        (".status.conditions[-1:].type", ["Complete"]),
        (".status.conditions[0].type", ["Created"]),
        (".status.conditions[*].type", ["Created", "Complete"]),
        ('.status.conditions[?(@.type=="Complete")].status', ["True"]),
        (".status.missing", []),
    ],
    ids=[
        "a field",
        "the last item (TrainJob's STATE)",
        "an index",
        "every item",
        "a filter (JobSet's columns)",
        "nothing",
    ],
)
def test_jsonpath_subset(path: str, found: list[Any]) -> None:
    assert jsonpath(OBJ, path) == found


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
        (400 * 86400, "400d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_ages_print_like_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (FieldError("spec.x", "must be >= 1"), "spec.x: Invalid value: must be >= 1"),
        (FieldError("spec.x", "", "Required"), "spec.x: Required value"),
        (
            FieldError("spec.x", "Invalid value: 0: must be >= 1"),
            "spec.x: Invalid value: 0: must be >= 1",
        ),
        (FieldError("", "unsupported runtime"), "unsupported runtime"),
    ],
    ids=[
        "a bare reason gets its type words",
        "a required field",
        "a reason that already says its type",
        "no path",
    ],
)
def test_field_errors_print_like_kubernetes(error: FieldError, text: str) -> None:
    assert field_error_text(error) == text


def test_several_errors_aggregate_in_brackets() -> None:
    errors = [FieldError("a", "x"), FieldError("b", "y")]
    assert aggregate_text(errors) == "[a: Invalid value: x, b: Invalid value: y]"


LIST_MAP = {
    "type": "object",
    "properties": {
        "conds": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "status": {"type": "string"}},
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def test_apply_paths_name_associative_list_elements_and_keep_other_lists_atomic() -> None:
    from kubetrain.local.apiserver.ssa import owned_paths

    obj = {
        "apiVersion": "v",
        "kind": "K",
        "conds": [{"type": "A", "status": "True"}],
        "tags": ["x"],
    }
    assert owned_paths(obj, LIST_MAP) == {
        ("conds", 'k:{"type":"A"}', "type"),
        ("conds", 'k:{"type":"A"}', "status"),
        ("tags",),
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {"kind": "K", "tags": ["x"], "conds": [{"type": "B"}, {"type": "A", "status": "T"}]},
            {"f:conds": {'k:{"type":"A"}': {"f:status": {}, "f:type": {}},
                         'k:{"type":"B"}': {"f:type": {}}},
             "f:tags": {}},
        ),
        (
            {"conds": [{"type": "A", "status": "T"}, {"type": "A", "reason": "R"}]},
            {"f:conds": {'k:{"type":"A"}': {"f:reason": {}, "f:status": {}, "f:type": {}}}},
        ),
        (
            {"metadata": {"name": "n", "uid": "u", "labels": {"b": "1", "a": "2"}}, "z": {},
             "y": {"x": 1}},
            {"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}, "f:y": {"f:x": {}}, "f:z": {}},
        ),
        ({"metadata": {"name": "n", "resourceVersion": "1"}}, {}),
    ],
    ids=[
        "fields and list elements come sorted, type fields and atomic lists are leaves",
        "two elements with one key own what they have between them",
        "metadata the server sets is nobody's, and an empty map is a leaf",
        "an object with nothing but its name owns nothing",
    ],
)  # fmt: skip
def test_an_applys_managed_fields_are_the_paths_it_owns_spelled_in_order(
    obj: dict[str, Any], expected: dict[str, Any]
) -> None:
    from kubetrain.local.apiserver.patching import fields_v1
    from kubetrain.local.apiserver.ssa import owned_fields_v1, owned_paths

    document = owned_fields_v1(obj, LIST_MAP)
    assert json.dumps(document) == json.dumps(expected)  # the order too
    assert json.dumps(fields_v1(owned_paths(obj, LIST_MAP))) == json.dumps(expected)


def test_apply_merge_by_key_and_element_removal() -> None:
    from kubetrain.local.apiserver.ssa import apply_merge, remove_path

    merged = apply_merge(
        {"conds": [{"type": "A", "status": "True"}]},
        {"conds": [{"type": "B", "status": "False"}, {"type": "A", "status": "False"}]},
        LIST_MAP,
    )
    assert merged == {"conds": [{"type": "A", "status": "False"}, {"type": "B", "status": "False"}]}
    remove_path(merged, ("conds", 'k:{"type":"A"}', "type"))
    assert merged == {"conds": [{"type": "B", "status": "False"}]}, (
        "an element without its key goes"
    )


def test_an_applied_element_without_a_defaulted_key_matches_the_stored_one() -> None:
    from kubetrain.local.apiserver.ssa import apply_merge

    ports = {
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                "items": {"type": "object"},
            }
        }
    }
    stored = {"ports": [{"containerPort": 29400, "protocol": "TCP"}]}
    assert apply_merge(stored, {"ports": [{"containerPort": 29400}]}, ports) == stored, (
        "no duplicate port"
    )


@pytest.mark.parametrize(
    ("hand", "published"),
    [
        ("PodSpec", "io.k8s.api.core.v1.PodSpec"),
        ("Container", "io.k8s.api.core.v1.Container"),
        ("ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        ("JobSpec", "io.k8s.api.batch.v1.JobSpec"),
    ],
    ids=lambda v: v.rsplit(".", 1)[-1] if "." in v else v,
)
def test_the_runtimes_core_patch_strategies_agree_with_the_published_ones(
    hand: str, published: str
) -> None:
    from kubetrain.runtime import smp

    def strategies(fields: Any) -> dict[str, tuple[Any, ...]]:
        return {
            f: (m.merge_key, m.strategy, m.retain_keys)
            for f, m in fields.items()
            if m.strategy is not None
        }

    assert strategies(smp.MERGE_KEYS[hand]) == strategies(smp.core_patch_types()[published])


@pytest.mark.parametrize(
    "tool",
    ["gen_patch_strategies.py", "gen_core_openapi.py"],
    ids=["the patch strategy table", "the core kinds' OpenAPI schemas"],
)
def test_the_committed_table_is_what_its_generator_writes(tool: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("kubernetes_validate", reason="the generators read its OpenAPI definitions")
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(repo / "tools" / tool), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


_OLD = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "a", "resourceVersion": "3", "labels": {"team": "ml"}},
    "data": {"x": "1", "y": "2"},
    "spec": {"empty": {}, "list": [1], "gone": "soon"},
}


@pytest.mark.parametrize(
    ("change", "recorded"),
    [
        pytest.param({}, set(), id="an unchanged object records nothing"),
        pytest.param({"data": {"x": "1", "y": "3"}}, {("data", "y")}, id="a changed value"),
        pytest.param(
            {"data": {"x": "1", "y": "2", "z": "0"}}, {("data", "z")}, id="an added value"
        ),
        pytest.param({"data": {"x": "1"}}, set(), id="a removed value is not owned by anyone"),
        pytest.param(
            {"spec": {"empty": {"now": 1}, "list": [1], "gone": "soon"}},
            {("spec", "empty"), ("spec", "empty", "now")},
            id="an empty map that gains a field",
        ),
        pytest.param(
            {"spec": {"empty": {}, "list": [1, 2], "gone": None}},
            {("spec", "list"), ("spec", "gone")},
            id="a list is one leaf and a null replaces a value",
        ),
        pytest.param(
            {"spec": {"empty": {}, "list": [1], "gone": "soon", "new": None}},
            set(),
            id="a null where there was nothing is no change",
        ),
        pytest.param(
            {"metadata": {"name": "a", "resourceVersion": "4", "labels": {"team": "cv"}}},
            {("metadata", "labels", "team")},
            id="server fields of metadata are nobody's",
        ),
    ],
)
def test_an_update_records_the_paths_it_changed(
    change: dict[str, Any], recorded: set[tuple[str, ...]]
) -> None:
    from kubetrain.local.apiserver.meta import changed_paths

    assert changed_paths({**_OLD, **change}, _OLD) == recorded


def test_new_uids_are_distinct_version_4_uuids_in_canonical_text() -> None:
    import uuid

    from kubetrain.local.apiserver.meta import new_uid

    uids = [new_uid() for _ in range(2000)]
    assert len(set(uids)) == len(uids)
    for text in uids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
    # Every variant nibble occurs (the two variant bits fixed, the other two random).
    assert {text[19] for text in uids} == set("89ab")


def test_new_uids_stay_distinct_across_threads_and_a_forked_child() -> None:
    import multiprocessing
    import threading

    from kubetrain.local.apiserver.meta import new_uid

    drawn: list[list[str]] = [[] for _ in range(4)]
    threads = [
        threading.Thread(target=lambda out: out.extend(new_uid() for _ in range(2000)), args=(d,))
        for d in drawn
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [u for d in drawn for u in d]
    assert len(set(every)) == len(every) == 8000
    # Random bytes read ahead by the parent are never handed out again by a forked child.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        child = pool.apply(_uids, (20,))
    assert not set(child) & set(_uids(20))


def _uids(n: int) -> list[str]:
    from kubetrain.local.apiserver.meta import new_uid

    return [new_uid() for _ in range(n)]


@pytest.mark.parametrize(
    "element",
    [
        {"name": "node", "containerPort": 8080, "protocol": None},
        {"name": 'quote " and backslash \\', "enabled": True},
        {"name": "tab\tand newline\n"},
        {"name": "ünïcode", "port": 2**70},
        {"name": "weight", "value": 1.5},
    ],
    ids=["plain", "escaped", "control characters", "non-ascii and a huge int", "a float"],
)
def test_an_associative_list_element_is_named_by_its_keys_as_sorted_compact_json(
    element: dict[str, Any],
) -> None:
    import json

    from kubetrain.local.apiserver.ssa import _component

    expected = json.dumps(element, sort_keys=True, separators=(",", ":"))
    assert _component(element, tuple(element)) == "k:" + expected
