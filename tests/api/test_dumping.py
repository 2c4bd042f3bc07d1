"""dump_yaml / dump_json / clean."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from kubetrain.api import clean, dump_json, dump_yaml, load_objects
from upstream_data import require

TJ = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
RT = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime"}


def _pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        **RT,
        "metadata": {"name": "rt"},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", "template": {"spec": {"template": {"spec": spec}}}}
                    ]
                }
            }
        },
    }


CLEAN_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "None, empty lists, empty strings and empty maps go",
        {
            **TJ,
            "metadata": {"name": "j", "labels": {}},
            "spec": {"trainer": {"args": [], "image": "", "env": None}},
        },
        {**TJ, "metadata": {"name": "j"}, "spec": {"trainer": {}}},
    ),
    (
        "an empty policy struct stays: its presence selects the framework",
        {**RT, "spec": {"mlPolicy": {"torch": {}, "numNodes": None}}},
        {**RT, "spec": {"mlPolicy": {"torch": {}}}},
    ),
    (
        "empty jax and xgboost policies stay",
        {**RT, "spec": {"mlPolicy": {"jax": {}}, "podGroupPolicy": {"coscheduling": {}}}},
        {**RT, "spec": {"mlPolicy": {"jax": {}}, "podGroupPolicy": {"coscheduling": {}}}},
    ),
    (
        "an emptyDir volume stays, empty resources go",
        _pod_spec(
            {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [{"name": "c", "resources": {}}],
            }
        ),
        _pod_spec({"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c"}]}),
    ),
    (
        "an empty string with a different default stays",
        {**RT, "spec": {"mlPolicy": {"mpi": {"mpiImplementation": ""}}}},
        {**RT, "spec": {"mlPolicy": {"mpi": {"mpiImplementation": ""}}}},
    ),
    (
        "an empty status goes (it must have a property)",
        {**TJ, "metadata": {"name": "j"}, "status": {}},
        {**TJ, "metadata": {"name": "j"}},
    ),
    (
        "zero and false are values, not emptiness",
        {**TJ, "spec": {"suspend": False, "trainer": {"numNodes": 0}}},
        {**TJ, "spec": {"suspend": False, "trainer": {"numNodes": 0}}},
    ),
    (
        "without a schema, empty structs stay and well-known maps go",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"annotations": {}},
            "spec": {"volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": {}},
        },
        {"apiVersion": "v1", "kind": "Pod", "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}},
    ),
]


@pytest.mark.parametrize(
    ("given", "expected"), [c[1:] for c in CLEAN_CASES], ids=[c[0] for c in CLEAN_CASES]
)
def test_clean(given: dict[str, Any], expected: dict[str, Any]) -> None:
    before = json.dumps(given)
    assert clean(given) == expected
    assert json.dumps(given) == before, "clean() must not change its argument"


def test_dump_yaml_is_block_style_with_key_order_kept() -> None:
    obj = {
        "kind": "TrainJob",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "spec": {"b": 1, "a": [1, 2]},
    }
    assert dump_yaml(obj) == (
        "kind: TrainJob\napiVersion: trainer.kubeflow.org/v1alpha1\nspec:\n  b: 1\n  a:\n  - 1\n  - 2\n"
    )


def test_dump_yaml_separates_documents_and_loads_back() -> None:
    objs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": str(i)}} for i in range(3)
    ]
    text = dump_yaml(objs)
    assert text.count("---\n") == 3
    assert load_objects(text, source="t") == objs


def test_multi_line_strings_are_literal_blocks_and_round_trip() -> None:
    script = "set -e\necho hi\ntorchrun train.py\n"
    text = dump_yaml({"command": ["bash", "-c", script]})
    assert "- |\n" in text
    assert yaml.safe_load(text) == {"command": ["bash", "-c", script]}


def test_strings_that_look_like_other_types_stay_strings() -> None:
    obj = {"a": "true", "b": "1", "c": "2025-01-01", "d": "null", "e": "1e3", "f": "~"}
    assert load_objects(dump_yaml({**obj, "apiVersion": "v1", "kind": "X"}), source="t")[0] == {
        **obj,
        "apiVersion": "v1",
        "kind": "X",
    }


def test_dump_json_writes_one_object_or_a_v1_list() -> None:
    one = {"apiVersion": "v1", "kind": "ConfigMap"}
    assert json.loads(dump_json(one)) == one
    assert json.loads(dump_json([one, one])) == {
        "apiVersion": "v1",
        "kind": "List",
        "items": [one, one],
    }
    assert dump_json(one, indent=None) == '{"apiVersion": "v1", "kind": "ConfigMap"}\n'


def test_sdk_bodies_survive_load_dump_load() -> None:
    for f in sorted(require("reference/sdk-trainjobs").glob("*.yaml")):
        objs = load_objects(f.read_text(), source=str(f))
        assert load_objects(dump_yaml(objs), source="again") == objs
        assert load_objects(dump_json(objs), source="again") == objs


def test_dumping_is_fast() -> None:
    text = require("upstream-runtimes/torch_distributed.yaml").read_text()
    (obj,) = load_objects(text, source="t")
    dump_yaml(obj)
    # CPU time, not wall time: the bound is about the dumper (libyaml's), not the machine's load.
    start = time.process_time()
    for _ in range(100):
        dump_yaml(clean(obj))
    assert (time.process_time() - start) / 100 < 0.002
