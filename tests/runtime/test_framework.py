"""The plugin framework: phase sorting, start-up rejection, registry order, upsert helpers."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.runtime import Environment, FeatureGateError, FeatureGates
from kubetrain.runtime.framework import Framework, FrameworkError
from kubetrain.runtime.plugins import PLUGIN_ORDER, REGISTRY, framework_for
from kubetrain.runtime.podspec import (
    tree_copy,
    upsert_env,
    upsert_port,
    upsert_volume,
    upsert_volume_mount,
)


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


class Enforcer(Named):
    def enforce_ml_policy(self, info: Any, job: Any) -> None:
        pass


class Status(Named):
    def trainjob_status(self, job: Any, jobset: Any, now: Any) -> None:
        return None


def test_plugins_are_sorted_into_phases_in_order() -> None:
    fw = Framework([Enforcer("a"), Enforcer("b"), Status("s")])
    assert [p.name for p in fw.ml_policy] == ["a", "b"]
    assert fw.status_provider is not None and fw.status_provider.name == "s"


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        pytest.param([Enforcer("a"), Enforcer("a")], "registered twice", id="duplicate names"),
        pytest.param([Named("idle")], "implements no capability", id="a plugin with no capability"),
        pytest.param(
            [Status("x"), Status("y")],
            "more than one TrainJob status provider",
            id="two status providers",
        ),
    ],
)
def test_ambiguous_setups_are_rejected_at_start_up(plugins: list[Any], message: str) -> None:
    with pytest.raises(FrameworkError, match=message):
        Framework(plugins)


def test_registered_plugins_follow_plugin_order() -> None:
    fw = framework_for(FeatureGates(), Environment())
    names = [p.name for p in fw.plugins]  # type: ignore[attr-defined]
    assert names == [n for n in PLUGIN_ORDER if n in names]
    assert fw.status_provider is not None and fw.status_provider.name == "jobset"
    assert "trainjobstatus" in names


def test_each_registry_entry_builds_the_plugin_of_its_name() -> None:
    for name, new in REGISTRY:
        plugin = new(FeatureGates(), Environment())
        assert plugin is not None and plugin.name == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", True, id="kubetrain turns TrainJobStatus on by default"),
        pytest.param("TrainJobStatus=false", False, id="off"),
        pytest.param("TrainJobStatus=True", True, id="Go spelling True"),
        pytest.param(" TrainJobStatus = 0 ,", False, id="spaces and trailing comma"),
    ],
)
def test_feature_gates_parse(text: str, expected: bool) -> None:
    assert FeatureGates.parse(text).trainjob_status is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("Nope=true", "unrecognized feature gate: Nope", id="unknown gate"),
        pytest.param(
            "TrainJobStatus=yes", "invalid value of TrainJobStatus=yes", id="not a Go bool"
        ),
        pytest.param("TrainJobStatus", "missing bool value", id="no value"),
    ],
)
def test_feature_gates_errors(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        FeatureGates.parse(text)


def test_upsert_env_replaces_in_place_and_appends_new() -> None:
    c: dict[str, Any] = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    upsert_env(
        c, {"name": "B", "value": "x"}, {"name": "C", "value": "3"}, {"name": "A", "value": "y"}
    )
    assert c["env"] == [
        {"name": "A", "value": "y"},
        {"name": "B", "value": "x"},
        {"name": "C", "value": "3"},
    ]


def test_upsert_port_matches_by_number_or_name() -> None:
    c: dict[str, Any] = {"ports": [{"name": "http", "containerPort": 80}]}
    upsert_port(
        c,
        {"containerPort": 80},
        {"name": "http", "containerPort": 81},
        {"containerPort": 29500, "name": "t"},
    )
    # The first upsert replaces by number and drops the name, so "http" no longer matches.
    assert c["ports"] == [
        {"containerPort": 80},
        {"name": "http", "containerPort": 81},
        {"containerPort": 29500, "name": "t"},
    ]


def test_upsert_mounts_by_path_and_volumes_by_name() -> None:
    c: dict[str, Any] = {}
    upsert_volume_mount(c, {"name": "a", "mountPath": "/x"}, {"name": "b", "mountPath": "/x"})
    assert c["volumeMounts"] == [{"name": "b", "mountPath": "/x"}]
    pod: dict[str, Any] = {"volumes": [{"name": "v", "emptyDir": {}}]}
    upsert_volume(pod, {"name": "v", "configMap": {"name": "c"}})
    assert pod["volumes"] == [{"name": "v", "configMap": {"name": "c"}}]


def test_tree_copy_is_deep() -> None:
    src = {"a": [{"b": 1}], "c": (1, 2)}
    out = tree_copy(src)
    out["a"][0]["b"] = 2
    assert src["a"][0]["b"] == 1 and out["c"] == [1, 2]
