"""How the local engine maps upstream's initializer images: built-in entries, the user's
images.yaml winning, the shared cache, and which failures are final."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.local.frameworks import initializer_failure, with_initializer_images
from kubetrain.local.frameworks.initializers import initializer_overlay
from kubetrain.local.sandbox import image_map_from_dict

DATASET = "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0"
MODEL = "ghcr.io/kubeflow/trainer/model-initializer:latest"

CASES = [
    pytest.param(
        {}, DATASET,
        ("python", "-m", "kubetrain.initializers", "dataset", "--output", "/workspace/dataset"),
        "/usr", id="the dataset image runs kubetrain's dataset initializer in the default env",
    ),
    pytest.param(
        {}, MODEL,
        ("python", "-m", "kubetrain.initializers", "model", "--output", "/workspace/model"),
        "/usr", id="the model image runs the model initializer",
    ),
    pytest.param(
        {"ghcr.io/kubeflow/trainer/model-initializer:*": {"prefix": "/opt/init"}}, MODEL,
        ("python", "-m", "kubetrain.initializers", "model", "--output", "/workspace/model"),
        "/opt/init", id="a user entry without an entrypoint keeps ours in its own env",
    ),
    pytest.param(
        {"ghcr.io/kubeflow/trainer/model-initializer:*": {"prefix": "/opt/x", "entrypoint": ["fetch"]}},
        MODEL, ("fetch",), "/opt/x", id="a user entry with an entrypoint wins whole",
    ),
    pytest.param(
        {}, "pytorch/pytorch:2.7.1", (), "/usr", id="other images are left alone",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("user", "image", "entrypoint", "prefix"), CASES)
def test_initializer_images(
    user: dict[str, dict[str, object]], image: str, entrypoint: tuple[str, ...], prefix: str
) -> None:
    images = with_initializer_images(
        image_map_from_dict({"default": {"prefix": "/usr"}, "images": user})
    )
    env = images.resolve(image)
    assert (env.entrypoint, str(env.prefix)) == (entrypoint, prefix)


def test_initializer_containers_get_their_namespaces_cache(tmp_path: Path) -> None:
    pod = {"metadata": {"namespace": "team-a"}, "spec": {"containers": [{"image": DATASET}]}}
    overlay = initializer_overlay(pod, {"image": DATASET}, tmp_path)
    cache = (tmp_path / "cache" / "initializers" / "team-a").resolve()
    assert overlay.env == {"KUBETRAIN_INITIALIZER_CACHE": str(cache)}
    assert overlay.dirs == ((cache, str(cache)),) and cache.is_dir()
    assert not initializer_overlay(pod, {"image": "pytorch/pytorch:2.7.1"}, tmp_path)


@pytest.mark.parametrize(
    ("image", "final"),
    [
        pytest.param(DATASET, True, id="a failed initializer pod is final"),
        pytest.param("pytorch/pytorch:2.7.1", False, id="a failed trainer pod is retried"),
    ],
)
def test_which_failures_are_final(image: str, final: bool) -> None:
    assert initializer_failure({"spec": {"containers": [{"image": image}]}}) is final
