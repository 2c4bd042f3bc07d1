"""A real S3 server (moto's, in its own process) with the example's data, once per session;
and for engine tests, a daemon per test that must leave no container process behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from initializers_support import example_setup

from kubetrain.testing.s3 import S3Server


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    with S3Server(auth=True) as server:
        yield server


@pytest.fixture(scope="session")
def example_data(s3: S3Server) -> S3Server:
    """The example's bucket, uploaded by the example's own setup step."""
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    example_setup().upload(s3.endpoint, s3.access_key_id, s3.secret_access_key)
    return s3
