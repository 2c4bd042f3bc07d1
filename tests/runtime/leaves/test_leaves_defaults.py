"""The default ClusterTrainingRuntimes against upstream's published files (trainer v2.3.0 manifests/base/runtimes/).

Upstream's files are found at test time by upstream_data. The whole ``spec`` must
match; the only differences allowed are listed in ``normalise`` with their reasons.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from kubetrain.runtime.defaults import (
    DATA_CACHE_RUNTIME_NAMES,
    DEFAULT_RUNTIME_NAMES,
    data_cache_runtimes,
    default_runtimes,
)
from upstream_data import require

WEBHOOK_LABEL = "trainer.kubeflow.org/webhook-validation"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
RELEASE_TAG = re.compile(r"^(ghcr\.io/kubeflow/trainer/[^:@]+):v2\.3\.0$")

EXPECTED_FRAMEWORK = {
    "torch-distributed": "torch",
    "deepspeed-distributed": "deepspeed",
    "mlx-distributed": "mlx",
    "jax-distributed": "jax",
    "xgboost-distributed": "xgboost",
    "torchtune-llama3.2-1b": "torchtune",
    "torchtune-llama3.2-3b": "torchtune",
    "torchtune-qwen2.5-1.5b": "torchtune",
    "torch-distributed-with-cache": "torch",
}


def upstream_runtimes() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(require("upstream-runtimes").glob("*.yaml")):
        obj = yaml.safe_load(path.read_text())
        found[obj["metadata"]["name"]] = obj
    return found


def normalise(ours: dict[str, Any], upstream: dict[str, Any]) -> dict[str, Any]:
    """Our runtime with the allowed differences folded back to upstream's spelling."""
    obj = copy.deepcopy(ours)
    # 1. The webhook-validation label: upstream's v2.3 install adds it to every runtime through
    #    kustomize/Helm commonLabels, so their source files mostly lack it; ours carry it.
    if WEBHOOK_LABEL not in upstream["metadata"].get("labels", {}):
        obj["metadata"]["labels"].pop(WEBHOOK_LABEL, None)

    # 2. Image tags: upstream's source files leave ghcr.io/kubeflow/trainer/* untagged and the
    #    release overlay retags them to v2.3.0; ours carry the release tag already.
    def untag(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    match = RELEASE_TAG.match(value)
                    if match and ":" not in _upstream_images.get(match.group(1), ":"):
                        node[key] = match.group(1)
                else:
                    untag(value)
        elif isinstance(node, list):
            for item in node:
                untag(item)

    _upstream_images = {}
    for image in _images(upstream):
        _upstream_images[image.split(":")[0]] = image
    untag(obj)
    return obj


def _images(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "image" and isinstance(v, str)] + [
            i for v in node.values() for i in _images(v)
        ]
    if isinstance(node, list):
        return [i for v in node for i in _images(v)]
    return []


def test_default_runtime_names_and_order() -> None:
    assert [r["metadata"]["name"] for r in default_runtimes()] == list(DEFAULT_RUNTIME_NAMES)
    assert [r["metadata"]["name"] for r in data_cache_runtimes()] == list(DATA_CACHE_RUNTIME_NAMES)


def test_every_upstream_runtime_is_covered() -> None:
    assert set(upstream_runtimes()) == set(DEFAULT_RUNTIME_NAMES) | set(DATA_CACHE_RUNTIME_NAMES)


@pytest.mark.parametrize("name", [*DEFAULT_RUNTIME_NAMES, *DATA_CACHE_RUNTIME_NAMES])
def test_runtime_matches_upstream(name: str) -> None:
    ours = {r["metadata"]["name"]: r for r in default_runtimes() + data_cache_runtimes()}[name]
    upstream = upstream_runtimes()[name]
    assert ours["metadata"]["labels"][WEBHOOK_LABEL] == "disabled"
    assert ours["metadata"]["labels"][FRAMEWORK_LABEL] == EXPECTED_FRAMEWORK[name]
    normalised = normalise(ours, upstream)
    assert normalised["apiVersion"] == upstream["apiVersion"]
    assert normalised["kind"] == upstream["kind"] == "ClusterTrainingRuntime"
    assert normalised["metadata"] == upstream["metadata"]
    assert normalised["spec"] == upstream["spec"]


@pytest.mark.parametrize("name", DEFAULT_RUNTIME_NAMES)
def test_every_kubeflow_image_carries_the_release_tag(name: str) -> None:
    runtime = {r["metadata"]["name"]: r for r in default_runtimes()}[name]
    for image in _images(runtime):
        if image.startswith("ghcr.io/kubeflow/trainer/"):
            assert image.endswith(":v2.3.0"), image


def test_callers_get_fresh_copies() -> None:
    first = default_runtimes()
    first[0]["metadata"]["name"] = "changed"
    first[0]["spec"]["mlPolicy"]["numNodes"] = 99
    again = default_runtimes()
    assert again[0]["metadata"]["name"] == "torch-distributed"
    assert again[0]["spec"]["mlPolicy"]["numNodes"] == 1
