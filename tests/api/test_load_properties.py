"""Property tests: whatever is thrown at load_objects, the only exception is LoadError."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.api import LoadError, dump_yaml, load_objects
from upstream_data import find

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=12), inner, max_size=4),
    ),
    max_leaves=20,
)


def _base_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for folder in ("reference/sdk-trainjobs", "upstream-runtimes"):
        found = find(folder)
        for f in sorted(found.glob("*.yaml")) if found is not None else ():
            docs.extend(d for d in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader) if d)
    docs.append(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "j"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "a",
                        "template": {
                            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}
                        },
                    }
                ],
                "successPolicy": {"operator": "All"},
            },
        }
    )
    return docs


BASE = _base_documents()


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


# The C dumper writes the same text as yaml.safe_dump (same representer) in a tenth of the time;
# the properties are about load_objects, not about how their input was written.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _yaml(doc: Any) -> str:
    return yaml.dump(doc, Dumper=DUMPER, sort_keys=True)


def _load(text: str) -> None:
    try:
        load_objects(text, source="prop")
    except LoadError as e:
        assert e.errors, "a LoadError always says why"
        str(e)


# 15 documents x their ~60 paths x a handful of value shapes: 200 examples cover each document's
# paths many times over; the C dumper keeps each one cheap.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_random_value_anywhere_in_a_real_document_gives_only_load_errors(
    data: st.DataObject,
) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASE)))
    paths = _paths(doc)
    path = data.draw(st.sampled_from(paths[1:]))
    value = data.draw(json_values)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    text = json.dumps(doc, allow_nan=True) if data.draw(st.booleans()) else _yaml(doc)
    _load(text)


# Any unknown key is refused the same way whatever its value: 150 examples reach every document's
# objects several times.
@settings(max_examples=150, deadline=None)
@given(st.data())
def test_an_extra_field_anywhere_gives_only_load_errors(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASE)))
    dicts = [p for p in _paths(doc) if isinstance(_at(doc, p), dict)]
    path = data.draw(st.sampled_from(dicts))
    _at(doc, path)[data.draw(st.text(max_size=10))] = data.draw(json_values)
    _load(json.dumps(doc, allow_nan=True))


yaml_only_values = st.recursive(
    st.one_of(
        scalars,
        st.dates(),
        st.datetimes(),
        st.binary(max_size=8),
        st.frozensets(st.integers(), max_size=3).map(set),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=5), st.integers(), st.dates()), inner, max_size=3
        ),
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_yaml_only_values_anywhere_give_only_load_errors(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(BASE)))
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    _at(doc, path[:-1])[path[-1]] = data.draw(yaml_only_values)
    _load(_yaml(doc))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_only_load_errors(text: str) -> None:
    _load(text)


yaml_fragments = st.sampled_from(
    [
        "apiVersion: trainer.kubeflow.org/v1alpha1\n",
        "kind: TrainJob\n",
        "kind: TrainingRuntime\n",
        "kind: JobSet\n",
        "apiVersion: jobset.x-k8s.io/v1alpha2\n",
        "metadata:\n  name: x\n",
        "spec:\n",
        "  runtimeRef:\n    name: r\n",
        "  trainer:\n    numNodes: 2\n",
        "  trainer: [1, 2]\n",
        "  mlPolicy:\n    mpi: {}\n",
        "---\n",
        "- a\n",
        "? [a, b]\n: c\n",
        "a: &x {b: 1}\nc: *x\n",
        "<<: {a: 1}\n",
        "x: !!binary aGVsbG8=\n",
        "x: !!timestamp 2001-12-14\n",
        "x: !!set {a, b}\n",
        "x: !!python/object:os.system ls\n",
        "\t",
        "  ",
        "{",
        "]",
        "'",
        '"',
        "x: 1e400\n",
        "x: .nan\n",
        "%YAML 1.1\n",
        "x: |\n  text\n",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(yaml_fragments, max_size=12))
def test_malformed_yaml_built_from_pieces_gives_only_load_errors(pieces: list[str]) -> None:
    _load("".join(pieces))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(BASE))
def test_loading_a_dump_of_a_loaded_document_gives_the_same_object(doc: dict[str, Any]) -> None:
    (once,) = load_objects(_yaml(doc), source="a")
    (twice,) = load_objects(dump_yaml(once), source="b")
    assert twice == once
