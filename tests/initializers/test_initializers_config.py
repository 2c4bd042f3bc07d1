"""Upstream's env contract, read into one value: a table of env → what gets fetched."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.initializers import InitializerError, read_config
from kubetrain.initializers.config import HF_MODEL_ALLOW_PATTERNS, MODEL_IGNORE_PATTERNS
from kubetrain.initializers.main import main
from kubetrain.initializers.select import selected

CASES: list[Any] = [
    pytest.param(
        "dataset", {"STORAGE_URI": "hf://tatsu-lab/alpaca"},
        {"scheme": "hf", "location": "tatsu-lab/alpaca", "ignore_patterns": ()},
        id="an hf dataset is the host and the first path segment",
    ),
    pytest.param(
        "dataset", {"STORAGE_URI": "hf://tatsu-lab/alpaca/data/train"},
        {"location": "tatsu-lab/alpaca"},
        id="deeper segments of an hf dataset URI are not part of the repo id",
    ),
    pytest.param(
        "model", {"STORAGE_URI": "hf://meta-llama/Llama-3.2-1B-Instruct"},
        {"location": "meta-llama/Llama-3.2-1B-Instruct", "ignore_patterns": MODEL_IGNORE_PATTERNS,
         "allow_patterns": HF_MODEL_ALLOW_PATTERNS},
        id="an hf model gets upstream's default ignore and allow patterns",
    ),
    pytest.param(
        "model", {"STORAGE_URI": "hf://org/m", "IGNORE_PATTERNS": " *.md, ,*.gguf "},
        {"ignore_patterns": ("*.md", "*.gguf")},
        id="IGNORE_PATTERNS is comma-separated, stripped, and replaces the default",
    ),
    pytest.param(
        "model", {"STORAGE_URI": "hf://org/m", "IGNORE_PATTERNS": ""},
        {"ignore_patterns": ()},
        id="an empty IGNORE_PATTERNS ignores nothing",
    ),
    pytest.param(
        "dataset",
        {"STORAGE_URI": "s3://bucket/a/b", "ENDPOINT": "http://s3:9000", "ACCESS_KEY_ID": "k",
         "SECRET_ACCESS_KEY": "s", "REGION": "eu-west-1", "ACCESS_TOKEN": ""},
        {"scheme": "s3", "location": "bucket", "prefix": "a/b", "endpoint": "http://s3:9000",
         "access_key_id": "k", "secret_access_key": "s", "region": "eu-west-1",
         "access_token": None},
        id="s3 takes the bucket, the key prefix and the credentials; empty values are unset",
    ),
    pytest.param(
        "model", {"STORAGE_URI": "s3://bucket"}, {"prefix": "", "allow_patterns": ()},
        id="an s3 URI without a path is the whole bucket",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "env", "expected"), CASES)
def test_the_env_contract(kind: Any, env: dict[str, str], expected: dict[str, Any]) -> None:
    cfg = read_config(kind, env)
    assert {k: getattr(cfg, k) for k in expected} == expected


ERRORS = [
    pytest.param({}, "STORAGE_URI is not set", id="no STORAGE_URI"),
    pytest.param({"STORAGE_URI": ""}, "STORAGE_URI is not set", id="an empty STORAGE_URI"),
    pytest.param(
        {"STORAGE_URI": "gs://b/k"},
        "gs://b/k: unsupported storage URI scheme (gs://); the dataset initializer fetches hf://, s3://",
        id="an unknown scheme names the URI and what is supported",
    ),
    pytest.param(
        {"STORAGE_URI": "/data/set"}, "/data/set: unsupported storage URI scheme (no scheme)",
        id="a plain path is no URI upstream's SDK produces",
    ),
    pytest.param(
        {"STORAGE_URI": "cache:///table"}, "cache:///table: no schema",
        id="a cache URI without its schema",
    ),
    pytest.param({"STORAGE_URI": "s3:///key"}, "s3:///key: no bucket", id="an s3 URI without bucket"),
]  # fmt: skip


@pytest.mark.parametrize(("env", "message"), ERRORS)
def test_what_cannot_be_fetched_is_one_line_naming_the_uri(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(InitializerError) as err:
        read_config("dataset", env)
    assert message in str(err.value) and "\n" not in str(err.value)


SELECTION = [
    pytest.param("model.safetensors", (), MODEL_IGNORE_PATTERNS, True, id="weights are kept"),
    pytest.param("sub/pytorch_model.bin", (), MODEL_IGNORE_PATTERNS, False, id="* crosses folders"),
    pytest.param("ckpt/x.json", (), ("ckpt/",), False, id="a pattern ending in / is a folder"),
    pytest.param("README.md", ("*.json", "*.txt"), (), False, id="allow patterns restrict"),
    pytest.param("vocab.txt", ("*.json", "*.txt"), ("vocab*",), False, id="ignore beats allow"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "allow", "ignore", "fetched"), SELECTION)
def test_file_selection(
    path: str, allow: tuple[str, ...], ignore: tuple[str, ...], fetched: bool
) -> None:
    assert selected(path, allow=allow, ignore=ignore) is fetched


def test_the_failure_line_goes_to_the_termination_log_the_kubelet_made(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_URI", "gs://bucket/key")
    log = tmp_path / "termination-log"
    log.write_text("")
    assert main(["dataset", "--output", str(tmp_path / "out")], termination_log=log) == 1
    assert log.read_text() == (
        "dataset initializer failed: gs://bucket/key: unsupported storage URI scheme (gs://); "
        "the dataset initializer fetches hf://, s3://, cache://"
    )
    # Where no kubelet made the file (a plain process), none is created.
    missing = tmp_path / "no-such-log"
    assert main(["dataset", "--output", str(tmp_path / "out")], termination_log=missing) == 1
    assert not missing.exists()
