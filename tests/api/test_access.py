"""kubetrain.api.access: reading loose objects, a value of the expected type or an empty one."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.access import as_dict, as_int, as_list, as_str, dicts, list_at, obj_at

JOB: dict[str, Any] = {
    "spec": {
        "template": {"spec": {"replicatedJobs": [{"name": "node"}, "junk", {"name": "x"}]}},
        "suspend": True,
        "labels": None,
    }
}


@pytest.mark.parametrize(
    ("obj", "keys", "expected"),
    [
        pytest.param(
            JOB, ("spec", "template"), JOB["spec"]["template"], id="a mapping two levels down"
        ),
        pytest.param(JOB, (), JOB, id="no keys gives the object itself"),
        pytest.param(JOB, ("spec", "missing", "deeper"), {}, id="a missing level gives {}"),
        pytest.param(JOB, ("spec", "labels"), {}, id="null gives {}"),
        pytest.param(JOB, ("spec", "suspend"), {}, id="a scalar where a mapping belongs gives {}"),
        pytest.param(JOB, ("spec", "suspend", "x"), {}, id="a scalar on the way gives {}"),
        pytest.param(None, ("spec",), {}, id="no object at all gives {}"),
    ],
)
def test_obj_at(obj: Any, keys: tuple[str, ...], expected: Any) -> None:
    assert obj_at(obj, *keys) == expected


def test_obj_at_returns_the_object_itself_not_a_copy() -> None:
    job: dict[str, Any] = {"spec": {"template": {}}}
    obj_at(job, "spec", "template")["edited"] = True
    assert job == {"spec": {"template": {"edited": True}}}


@pytest.mark.parametrize(
    ("obj", "keys", "expected"),
    [
        pytest.param(
            JOB,
            ("spec", "template", "spec", "replicatedJobs"),
            [{"name": "node"}, "junk", {"name": "x"}],
            id="the list at the end of the path, as it is",
        ),
        pytest.param(JOB, ("spec", "template"), [], id="a mapping where a list belongs gives []"),
        pytest.param(JOB, ("status", "conditions"), [], id="a missing level gives []"),
        pytest.param(None, ("spec",), [], id="no object at all gives []"),
    ],
)
def test_list_at(obj: Any, keys: tuple[str, ...], expected: Any) -> None:
    assert list_at(obj, *keys) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            [{"a": 1}, "junk", None, {"b": 2}],
            [{"a": 1}, {"b": 2}],
            id="mappings kept, the rest skipped",
        ),
        pytest.param({"a": 1}, [], id="a mapping is not a list of mappings"),
        pytest.param(None, [], id="null gives []"),
    ],
)
def test_dicts(value: Any, expected: Any) -> None:
    assert dicts(value) == expected


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        pytest.param(lambda: as_dict({"a": 1}), {"a": 1}, id="as_dict keeps a mapping"),
        pytest.param(lambda: as_dict([1]), {}, id="as_dict of a list is {}"),
        pytest.param(lambda: as_list([1]), [1], id="as_list keeps a list"),
        pytest.param(lambda: as_list("ab"), [], id="as_list of a string is []"),
        pytest.param(lambda: as_str("x"), "x", id="as_str keeps a string"),
        pytest.param(lambda: as_str(3), "", id="as_str of a number is empty"),
        pytest.param(lambda: as_str(None, "dflt"), "dflt", id="as_str of null is the default"),
        pytest.param(lambda: as_int(4, 1), 4, id="as_int keeps an integer"),
        pytest.param(lambda: as_int(True, 1), 1, id="a bool is not an integer"),
        pytest.param(lambda: as_int("4", 1), 1, id="a numeric string is not an integer"),
        pytest.param(lambda: as_int(None, 7), 7, id="as_int of null is the default"),
    ],
)
def test_single_values(read: Any, expected: Any) -> None:
    assert read() == expected
