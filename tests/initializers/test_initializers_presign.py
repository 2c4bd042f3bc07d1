"""The initializer's presigned URLs (signed by awscrt) are byte for byte botocore's own, for any
key, endpoint, region and credentials, whichever of its signers botocore uses (its Python one,
or awscrt's where that is installed); where they could not be, botocore signs each URL itself."""

from __future__ import annotations

import calendar
import functools
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kubetrain.initializers.presign import Presigner

MODEL_KEY = "data/part-00000.parquet"
KEYS = [
    "data/part-00001.parquet",
    "a key with spaces/and+plus=equals~tilde.bin",
    "ünïcödé/データ.json",
    "double//slash/./dot/../x",
    "percent%20already-quoted?&#.txt",
]


@functools.cache
def _session(token: str | None) -> Any:
    import boto3

    # One per credentials: its clients share the service models it loaded once.
    return boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        aws_session_token=token,
    )


def _client(endpoint: str | None, region: str | None, token: str | None) -> Any:
    from botocore.config import Config

    style = "path" if endpoint else "auto"
    return _session(token).client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        config=Config(s3={"addressing_style": style}, signature_version="s3v4"),
    )


def _parts(url: str) -> tuple[str, list[str]]:
    """The URL up to its query, and the query's parameters as written: their order does not
    change a SigV4 signature, and botocore's two signers order them differently."""
    head, _, query = url.partition("?")
    return head, sorted(query.split("&"))


def _epoch(url: str) -> float:
    amz_date = parse_qs(urlsplit(url).query)["X-Amz-Date"][0]
    return float(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))


def _presigner(client: Any, bucket: str, token: str | None, clock: list[float]) -> Presigner:
    def botocore(key: str) -> str:
        params = {"Bucket": bucket, "Key": key}
        return str(client.generate_presigned_url("get_object", Params=params, ExpiresIn=3600))

    return Presigner(
        MODEL_KEY,
        botocore(MODEL_KEY),
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token=token,
        fallback=botocore,
        clock=lambda: clock[0],
    )


@pytest.fixture(params=["python", "crt"], ids=["botocore's Python signer", "botocore's CRT signer"])
def botocore_signer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """botocore signs with awscrt wherever awscrt is installed (as it is with the initializers):
    the reference is also its own Python signer, written apart from awscrt."""
    import botocore.auth

    if request.param == "python":
        monkeypatch.setitem(
            botocore.auth.AUTH_TYPE_MAPS, "s3v4-query", botocore.auth.S3SigV4QueryAuth
        )
    elif botocore.auth.AUTH_TYPE_MAPS["s3v4-query"] is botocore.auth.S3SigV4QueryAuth:
        pytest.skip("botocore does not sign with awscrt here (awscrt is not installed)")
    return str(request.param)


@pytest.mark.parametrize(
    ("endpoint", "region", "token"),
    [
        pytest.param("http://127.0.0.1:9000", None, None, id="a local server, path-style"),
        pytest.param("https://s3.example.internal", "auto", None, id="an https endpoint"),
        pytest.param(None, "eu-west-1", None, id="AWS, a bucket host name in a region"),
        pytest.param(None, "us-east-1", "FQoG/+token=", id="AWS with temporary credentials"),
    ],
)
def test_every_url_is_the_one_botocore_writes_at_the_same_second(
    endpoint: str | None, region: str | None, token: str | None, botocore_signer: str
) -> None:
    client = _client(endpoint, None if region == "auto" else region, token)
    clock = [0.0]
    signer = _presigner(client, "bucket-1", token, clock)
    assert signer.exact
    for key in KEYS:
        expected = client.generate_presigned_url(
            "get_object", Params={"Bucket": "bucket-1", "Key": key}, ExpiresIn=3600
        )
        clock[0] = _epoch(expected)
        assert _parts(signer.url(key)) == _parts(expected)


def test_the_signing_key_follows_the_day(
    monkeypatch: pytest.MonkeyPatch, botocore_signer: str
) -> None:
    import datetime

    import botocore.auth
    import botocore.compat

    client = _client("http://127.0.0.1:9000", None, None)
    clock = [0.0]
    signer = _presigner(client, "bucket-1", None, clock)
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)

    def two_days_later(remove_tzinfo: bool = True) -> datetime.datetime:
        return later.replace(tzinfo=None) if remove_tzinfo else later

    # Each of botocore's signers reads the time through its own import of this function.
    monkeypatch.setattr(botocore.auth, "get_current_datetime", two_days_later)
    if botocore_signer == "crt":
        import botocore.crt.auth

        monkeypatch.setattr(botocore.crt.auth, "get_current_datetime", two_days_later)
    expected = client.generate_presigned_url(
        "get_object", Params={"Bucket": "bucket-1", "Key": KEYS[0]}, ExpiresIn=3600
    )
    clock[0] = later.timestamp()
    assert _parts(signer.url(KEYS[0])) == _parts(expected)


def test_a_url_shape_it_does_not_know_is_left_to_botocore() -> None:
    client = _client("http://127.0.0.1:9000", None, None)
    model = client.generate_presigned_url(
        "get_object", Params={"Bucket": "b", "Key": MODEL_KEY}, ExpiresIn=3600
    )
    seen: list[str] = []

    def botocore(key: str) -> str:
        seen.append(key)
        return "from botocore"

    signer = Presigner(
        MODEL_KEY,
        model + "&x-id=GetObject",  # a parameter this signer does not write
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token=None,
        fallback=botocore,
    )
    assert not signer.exact
    assert signer.url("k") == "from botocore" and seen == ["k"]
