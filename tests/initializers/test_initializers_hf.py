"""``hf://`` against a local stand-in for the Hub's download routes, and from the offline
cache alone: upstream's file selection, tokens, cache hits, and one-line failures. Each run is
``python -m kubetrain.initializers`` in its own process, as in a pod (huggingface_hub reads
HF_ENDPOINT and HF_HUB_OFFLINE once, at import)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.testing.hub import HubRepo, HubStandIn

pytest.importorskip("huggingface_hub")

MODEL = HubRepo(
    {
        "config.json": b'{"hidden": 4}',
        "model.safetensors": b"w" * 4096,
        "tokenizer.model": b"t",
        "pytorch_model.bin": b"b",
        "flax_model.msgpack": b"f",
        "README.md": b"# tiny",
    },
    token="hf_right",
)
DATASET = HubRepo({"data/train-00000.parquet": b"p" * 100, "README.md": b"# data"})


@pytest.fixture
def hub() -> Iterator[HubStandIn]:
    with HubStandIn({("model", "org/tiny"): MODEL, ("dataset", "org/data"): DATASET}) as server:
        yield server


def initialize(
    kind: str, env: dict[str, str], out: Path, cache: Path | None, **extra: str
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    full.update(env, **extra)
    full.pop("KUBETRAIN_INITIALIZER_CACHE", None)
    if cache is not None:
        full["KUBETRAIN_INITIALIZER_CACHE"] = str(cache)
    argv = [sys.executable, "-m", "kubetrain.initializers", kind, "--output", str(out)]
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120)


def files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".cache" not in p.parts
    }


def test_a_model_gets_upstreams_selection_and_a_second_run_downloads_nothing(
    hub: HubStandIn, tmp_path: Path
) -> None:
    env = {"STORAGE_URI": "hf://org/tiny", "ACCESS_TOKEN": "hf_right", "HF_ENDPOINT": hub.endpoint}
    first = initialize("model", env, tmp_path / "a", tmp_path / "cache")
    assert first.returncode == 0, first.stdout + first.stderr
    assert files(tmp_path / "a") == {"config.json", "model.safetensors", "tokenizer.model"}
    downloads = dict(hub.requests)
    second = initialize("model", env, tmp_path / "b", tmp_path / "cache")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "cache hit: all 3 files" in second.stdout
    assert hub.requests == downloads  # not one file fetched again
    assert files(tmp_path / "b") == files(tmp_path / "a")


def test_the_offline_cache_alone_serves_what_was_fetched_before(
    hub: HubStandIn, tmp_path: Path
) -> None:
    env = {"STORAGE_URI": "hf://org/data", "HF_ENDPOINT": hub.endpoint}
    online = initialize("dataset", env, tmp_path / "a", tmp_path / "cache")
    assert online.returncode == 0, online.stdout + online.stderr
    offline = initialize("dataset", env, tmp_path / "b", tmp_path / "cache", HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert files(tmp_path / "b") == {"data/train-00000.parquet", "README.md"}


FAILURES = [
    pytest.param(
        "model", {"STORAGE_URI": "hf://org/tiny", "ACCESS_TOKEN": "hf_wrong"}, {},
        "hf://org/tiny: model repository 'org/tiny' not found on {endpoint}, or not visible "
        "with this token (ACCESS_TOKEN)",
        id="a wrong token",
    ),
    pytest.param(
        "dataset", {"STORAGE_URI": "hf://org/missing"}, {},
        "hf://org/missing: dataset repository 'org/missing' not found on {endpoint}, or not "
        "visible without a token",
        id="a missing repository",
    ),
    pytest.param(
        "dataset", {"STORAGE_URI": "hf://org/never-fetched"}, {"HF_HUB_OFFLINE": "1"},
        "hf://org/never-fetched: dataset repository 'org/never-fetched' is not in the local "
        "cache",
        id="offline, a repository the cache never saw",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "env", "extra", "message"), FAILURES)
def test_a_failure_is_one_line_naming_the_uri_and_the_cause(
    hub: HubStandIn,
    tmp_path: Path,
    kind: str,
    env: dict[str, str],
    extra: dict[str, str],
    message: str,
) -> None:
    result = initialize(
        kind, {**env, "HF_ENDPOINT": hub.endpoint}, tmp_path / "out", tmp_path / "cache", **extra
    )
    assert result.returncode == 1
    expected = message.format(endpoint=hub.endpoint)
    errors = [line for line in result.stdout.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and expected in errors[0], result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
