"""Fetching from a real S3 server (moto, checking credentials): what lands where, what the
cache and a rerun skip, that a changed object is fetched anew, and that a large object lands
whole however its streams were cut into ranges or the cuts taken back."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubetrain.initializers.s3 as s3_source
from kubetrain.initializers import run
from kubetrain.initializers.config import read_config
from kubetrain.initializers.store import Store
from kubetrain.testing.s3 import S3Server

BUCKET = "initializer-tests"


@pytest.fixture(scope="module")
def bucket(s3: S3Server) -> S3Server:
    client = s3.client()
    client.create_bucket(Bucket=BUCKET)
    for key, body in {
        "model/model.safetensors": b"w" * 3_000_000,
        "model/pytorch_model.bin": b"b" * 10,
        "model/tokenizer/config.json": b"{}",
        "single.parquet": b"p" * 100,
    }.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
    return s3


def _env(s3: S3Server, uri: str) -> dict[str, str]:
    return {
        "STORAGE_URI": uri,
        "ENDPOINT": s3.endpoint,
        "ACCESS_KEY_ID": s3.access_key_id,
        "SECRET_ACCESS_KEY": s3.secret_access_key,
    }


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_a_model_prefix_lands_below_the_output_without_the_ignored_files(
    bucket: S3Server, tmp_path: Path
) -> None:
    run("model", _env(bucket, f"s3://{BUCKET}/model"), tmp_path / "out", tmp_path / "cache")
    assert _files(tmp_path / "out") == {"model.safetensors", "tokenizer/config.json"}
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"w" * 3_000_000


def test_a_uri_naming_one_object_gives_that_file(bucket: S3Server, tmp_path: Path) -> None:
    run("dataset", _env(bucket, f"s3://{BUCKET}/single.parquet"), tmp_path / "out")
    assert _files(tmp_path / "out") - {".kubetrain-initializer.jsonl"} == {"single.parquet"}


def test_the_cache_serves_a_second_run_and_a_changed_object_is_fetched_again(
    bucket: S3Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubetrain.initializers")
    env = _env(bucket, f"s3://{BUCKET}/model")
    run("model", env, tmp_path / "first", tmp_path / "cache")
    caplog.clear()
    run("model", env, tmp_path / "second", tmp_path / "cache")
    assert "cache hit: 2 of 2 objects" in caplog.text and "fetching" not in caplog.text
    assert _files(tmp_path / "second") == _files(tmp_path / "first")

    bucket.client().put_object(Bucket=BUCKET, Key="model/tokenizer/config.json", Body=b"{1}")
    caplog.clear()
    run("model", env, tmp_path / "third", tmp_path / "cache")
    assert "cache hit: 1 of 2 objects" in caplog.text and "fetching 1 objects" in caplog.text
    assert (tmp_path / "third" / "tokenizer" / "config.json").read_bytes() == b"{1}"


def test_without_a_cache_a_rerun_fetches_only_what_is_missing(
    bucket: S3Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubetrain.initializers")
    env = _env(bucket, f"s3://{BUCKET}/model")
    out = tmp_path / "out"
    run("model", env, out)
    # As if killed half-way: one file gone, a partial download left behind.
    (out / "model.safetensors").unlink()
    (out / "model.safetensors.123-456.part").write_bytes(b"w" * 10)
    caplog.clear()
    run("model", env, out)
    assert "fetching 1 objects" in caplog.text
    assert (out / "model.safetensors").read_bytes() == b"w" * 3_000_000
    assert not list(out.rglob("*.part"))


def test_role_arn_fetches_with_the_roles_temporary_credentials(
    bucket: S3Server, tmp_path: Path
) -> None:
    import boto3

    session = boto3.session.Session(
        aws_access_key_id=bucket.access_key_id,
        aws_secret_access_key=bucket.secret_access_key,
        region_name="us-east-1",
    )
    iam_client = session.client("iam", endpoint_url=bucket.endpoint)
    # moto serves IAM and STS at the same endpoint as S3.
    trust = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}'
    role = iam_client.create_role(RoleName="reader", AssumeRolePolicyDocument=trust)["Role"]
    iam_client.put_role_policy(
        RoleName="reader",
        PolicyName="read",
        PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}',
    )
    env = {**_env(bucket, f"s3://{BUCKET}/single.parquet"), "ROLE_ARN": role["Arn"]}
    run("dataset", env, tmp_path / "out")
    assert (tmp_path / "out" / "single.parquet").read_bytes() == b"p" * 100


def _stream(tmp_path: Path, key: str, size: int) -> s3_source._Stream:
    obj = s3_source.S3Object(key, key.rsplit("/", 1)[-1], size, "")
    return s3_source._Stream(s3_source._Job(obj, tmp_path / "part", False), 0, size, size)


@pytest.fixture(scope="module")
def open_bucket() -> Iterator[S3Server]:
    """moto without auth: with auth it cannot check a presigned URL (HTTP 500)."""
    with S3Server() as server:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        client.put_object(Bucket=BUCKET, Key="single.parquet", Body=b"p" * 100)
        yield server


@pytest.mark.parametrize(
    ("server", "key", "presigned"),
    [
        pytest.param("open", "single.parquet", True, id="an object comes by its presigned GET"),
        pytest.param(
            "open", "no/such.key", False, id="a failed presigned GET is left to GetObject"
        ),
        pytest.param("auth", "single.parquet", False, id="so is one the server cannot check"),
    ],
)
def test_presigned_gets_and_what_they_leave_to_getobject(
    request: pytest.FixtureRequest, tmp_path: Path, server: str, key: str, presigned: bool
) -> None:
    from kubetrain.initializers.meter import Meter

    s3: S3Server = request.getfixturevalue("open_bucket" if server == "open" else "bucket")
    client = s3_source.s3_client(read_config("dataset", _env(s3, f"s3://{BUCKET}/")), concurrency=2)
    meter = Meter(100)
    fetch = s3_source._Fetch(client, s3_source._http(s3.endpoint, 2), BUCKET, meter, None, 2)
    stream = _stream(tmp_path, key, 100)
    assert fetch._presigned(stream) is presigned
    assert meter.done == (100 if presigned else 0)
    stream = _stream(tmp_path, key, 100)
    if key == "no/such.key":
        # GetObject then says what is wrong in S3's words, as the failure message needs.
        with pytest.raises(client.exceptions.NoSuchKey):
            fetch._get(stream)
    else:
        fetch._get(stream)
        assert stream.job.path.read_bytes() == b"p" * 100


@pytest.mark.parametrize(
    ("server", "taken_over"),
    [
        pytest.param("open", False, id="many small objects come by presigned GETs on one loop"),
        pytest.param("auth", True, id="where the server refuses those GETs, GetObject fetches"),
    ],
)
def test_many_small_objects_land_whole_and_in_the_manifest(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    server: str,
    taken_over: bool,
) -> None:
    from kubetrain.initializers.store import MANIFEST

    s3: S3Server = request.getfixturevalue("open_bucket" if server == "open" else "bucket")
    client = s3.client()
    bodies = {f"{i:02d}/{i}.bin": os.urandom(100 * i) for i in range(12)}  # 0 bytes too
    for rel, body in bodies.items():
        client.put_object(Bucket=BUCKET, Key=f"many/{rel}", Body=body)
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="kubetrain.initializers"):
        s3_source.fetch_s3(
            read_config("dataset", _env(s3, f"s3://{BUCKET}/many")),
            Store(out),
            concurrency=4,
        )
    assert {rel: (out / rel).read_bytes() for rel in bodies} == bodies
    assert _files(out) == {*bodies, MANIFEST}
    assert len((out / MANIFEST).read_text().splitlines()) == len(bodies)
    assert ("12 of 12 objects came by GetObject" in caplog.text) is taken_over


BLOB = "large/blob.bin"


@pytest.fixture(scope="module")
def blob(bucket: S3Server, open_bucket: S3Server) -> bytes:
    body = os.urandom(3_000_001)
    for server in (bucket, open_bucket):
        server.client().put_object(Bucket=BUCKET, Key=BLOB, Body=body)
    return body


def _large_job(tmp_path: Path, size: int) -> s3_source._Job:
    job = s3_source._Job(s3_source.S3Object(BLOB, "blob.bin", size, ""), tmp_path / "b", True)
    with job.path.open("wb") as f:
        f.truncate(size)
    return job


def _counted_first_stream(
    job: s3_source._Job, pool: Any, s3: S3Server | None = None
) -> tuple[s3_source._Fetch, s3_source._Stream]:
    """A fetch of ``job`` (from ``s3``; none: no GET can be sent) whose first stream, the whole
    object, is counted but not started: the test decides what is cut and what runs when."""
    from kubetrain.initializers.meter import Meter

    client = http = None
    if s3 is not None:
        cfg = read_config("dataset", _env(s3, f"s3://{BUCKET}/"))
        client, http = s3_source.s3_client(cfg, concurrency=8), s3_source._http(s3.endpoint, 8)
    size = job.obj.size
    fetch = s3_source._Fetch(client, http, BUCKET, Meter(size), pool, 8)
    first = s3_source._Stream(job, 0, size, size)
    with fetch.lock:
        fetch._add(first)
    return fetch, first


# Scaled down: ranges of at least 256 KB, so a 3 MB object can be cut a few times.
SERVERS = [
    pytest.param("open", id="by presigned GETs"),
    pytest.param("auth", id="by GetObject"),
]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(
    ("cuts", "take_back", "starts"),
    [
        pytest.param(3, False, [1_500_000, 2_250_000, 750_000], id="cut in four ranges"),
        pytest.param(1, True, [1_500_000], id="cut, then the cut taken back"),
    ],
)
def test_a_large_object_lands_whole_however_its_streams_were_cut(
    request: pytest.FixtureRequest,
    blob: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: str,
    cuts: int,
    take_back: bool,
    starts: list[int],
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(s3_source, "MIN_PART", 256 * 1024)
    s3: S3Server = request.getfixturevalue("open_bucket" if server == "open" else "bucket")
    job = _large_job(tmp_path, len(blob))
    with ThreadPoolExecutor(8) as pool:
        fetch, first = _counted_first_stream(job, pool, s3)  # its cuts come first
        children = fetch.split(cuts)
        assert [c.start for c in children] == starts
        if take_back:
            # The first stream has not stopped, so it reads on through the child's range.
            fetch.take_back(children)
            assert first.end == len(blob) and all(c.taken_back for c in children)
        pool.submit(fetch._run, first)
        job.done.wait()
    assert job.error is None
    assert job.path.read_bytes() == blob
    assert fetch.meter.done == len(blob)  # bytes a taken-back stream fetched are not counted twice


class _Held:
    """An executor that runs nothing until told: the test decides when each stream runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[Any, ...]]] = []

    def submit(self, fn: Any, *args: Any) -> None:
        self.calls.append((fn, args))


@pytest.mark.parametrize("server", SERVERS)
def test_a_stream_at_its_end_reads_on_where_the_next_range_has_not_begun(
    request: pytest.FixtureRequest,
    blob: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: str,
) -> None:
    monkeypatch.setattr(s3_source, "MIN_PART", 256 * 1024)
    s3: S3Server = request.getfixturevalue("open_bucket" if server == "open" else "bucket")
    job = _large_job(tmp_path, len(blob))
    fetch, first = _counted_first_stream(job, _Held(), s3)
    (child,) = fetch.split(1)  # its GET not sent yet (a server slow to answer a range)
    fetch._run(first)
    assert first.end == len(blob) and child.taken_back
    fetch._run(child)  # when it runs at last, nothing is left for it
    assert child.asked == 0.0  # it never sent its GET
    assert job.done.is_set() and job.error is None
    assert job.path.read_bytes() == blob
    assert fetch.meter.done == len(blob)


def test_a_trial_slower_in_both_its_windows_is_taken_back(tmp_path: Path) -> None:
    job = _large_job(tmp_path, 1 << 30)
    fetch, first = _counted_first_stream(job, _Held())
    fetch.waits = [0.001]  # the first GET's wait for its first byte: ranges are cheap
    fetch.tick(100e6)
    children = list(fetch.trial)
    assert len(children) == 3  # the first trial makes four streams in all
    fetch.tick(50e6)  # not a clear gain: measured once more, the trial still under way
    assert fetch.trial == children and not any(c.taken_back for c in children)
    fetch.tick(60e6)
    assert all(c.taken_back for c in children) and first.end == job.obj.size


def test_whatever_the_ramp_decides_a_large_object_lands_whole(
    open_bucket: S3Server, blob: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows of 5 ms: the ramp splits and takes back while the streams run, at random.
    monkeypatch.setattr(s3_source, "MIN_PART", 256 * 1024)
    env = _env(open_bucket, f"s3://{BUCKET}/large/")
    for attempt in range(3):
        out = tmp_path / str(attempt)
        s3_source.fetch_s3(read_config("dataset", env), Store(out), window_s=0.005)
        assert (out / "blob.bin").read_bytes() == blob


@pytest.mark.parametrize("server", SERVERS)
def test_a_large_object_stored_gzipped_lands_as_stored_not_decoded(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    import gzip

    # As `aws s3 cp` and GetObject give it: the object's bytes, whatever its Content-Encoding.
    monkeypatch.setattr(s3_source, "MIN_PART", 256 * 1024)
    s3: S3Server = request.getfixturevalue("open_bucket" if server == "open" else "bucket")
    body = gzip.compress(os.urandom(1_000_000) * 3, compresslevel=1)
    s3.client().put_object(
        Bucket=BUCKET, Key="gzipped/blob.bin.gz", Body=body, ContentEncoding="gzip"
    )
    out = tmp_path / "out"
    s3_source.fetch_s3(read_config("dataset", _env(s3, f"s3://{BUCKET}/gzipped/")), Store(out))
    assert (out / "blob.bin.gz").read_bytes() == body


@pytest.mark.parametrize(
    ("env", "direct"),
    [
        pytest.param({}, True, id="without a proxy GETs go straight to the endpoint"),
        pytest.param(
            {"HTTP_PROXY": "http://proxy.invalid:3128"},
            False,
            id="with a proxy every GET goes through botocore, which knows proxies",
        ),
        pytest.param(
            {"HTTP_PROXY": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1"},
            True,
            id="an endpoint the proxy settings bypass is reached directly",
        ),
    ],
)
def test_the_presigned_pool_only_where_no_proxy_applies(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], direct: bool
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert (s3_source._http("http://127.0.0.1:9000", 4) is not None) is direct


def test_the_benchmarks_s3rver_without_npm_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubetrain.testing.s3rver import install_s3rver

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match=r"needs Node\.js and npm: apt-get install nodejs npm"):
        install_s3rver(tmp_path / "prefix")
